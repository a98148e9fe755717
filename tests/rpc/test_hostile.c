/*
 * test_hostile.c — 500 malformed or hostile requests against a worker with
 * a token and small limits, sent as raw bytes over loopback: missing and
 * wrong tokens, bad JSON, wrong protocol versions, truncated bodies and
 * frames, oversized headers and bodies, huge declared lengths, bad fields
 * of every kind. Each is answered with a 4xx (or, for a body the client
 * cuts short, the connection is closed), nothing crashes (this runs under
 * the sanitizers), and afterwards the worker still measures normally.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cJSON.h>

#include "rpc_test.h"

#define TOKEN "hostile-test-token"

typedef struct fixture {
  ts_worker *worker;
  int port;
  ts_artifact *add;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  ts_error err;
  ts_error_clear(&err);
  ts_worker_options o = ts_worker_defaults();
  o.port = 0;
  o.token = TOKEN;
  o.device.threads = 1;
  o.limits.max_body_bytes = 1 << 20;
  o.limits.max_json_bytes = 64 << 10;
  o.limits.max_artifact_bytes = 256 << 10;
  o.limits.max_header_bytes = 8 << 10;
  o.limits.max_candidates = 16;
  if (ts_worker_start(&o, &f->worker, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return -1;
  }
  f->port = ts_worker_port(f->worker);
  f->add = build_tir(TIR_ADD);
  *state = f;
  return f->add ? 0 : -1;
}

static int teardown(void **state) {
  fixture *f = *state;
  ts_worker_stop(f->worker);
  ts_artifact_release(f->add);
  free(f);
  return 0;
}

/* A growing byte buffer. */
typedef struct buf {
  char *p;
  size_t n, cap;
} buf;

static void put(buf *b, const void *p, size_t n) {
  if (b->n + n + 1 > b->cap) {
    b->cap = (b->n + n + 1) * 2;
    b->p = realloc(b->p, b->cap);
  }
  memcpy(b->p + b->n, p, n);
  b->n += n;
  b->p[b->n] = 0;
}

static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

static void putf(buf *b, const char *fmt, ...) {
  char tmp[4096];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  put(b, tmp, (size_t)n);
}

/* The JSON of a valid one-candidate measure request for `a` (the artifact
 * bytes at offset 0 of the payload). */
static cJSON *valid_head(const ts_artifact *a) {
  cJSON *h = cJSON_CreateObject();
  cJSON_AddNumberToObject(h, "protocol", 1);
  cJSON *c = cJSON_AddObjectToObject(h, "config");
  cJSON_AddNumberToObject(c, "number", 1);
  cJSON_AddNumberToObject(c, "repeat", 1);
  cJSON_AddNumberToObject(c, "min_repeat_ms", 0);
  cJSON_AddNumberToObject(c, "warmup", 0);
  cJSON_AddNumberToObject(c, "timeout_ms", 5000);
  cJSON_AddNumberToObject(c, "threads", 1);
  cJSON *cands = cJSON_AddArrayToObject(h, "candidates");
  cJSON *cand = cJSON_CreateObject();
  cJSON_AddItemToArray(cands, cand);
  cJSON_AddNumberToObject(cand, "id", 0);
  cJSON *art = cJSON_AddObjectToObject(cand, "artifact");
  cJSON_AddStringToObject(art, "kind", "cpu_object");
  cJSON_AddStringToObject(art, "entry", a->entry);
  cJSON *args = cJSON_AddArrayToObject(art, "args");
  for (int i = 0; i < a->n_args; i++) {
    cJSON *x = cJSON_CreateObject();
    cJSON_AddItemToArray(args, x);
    cJSON_AddStringToObject(x, "name", a->args[i].name);
    cJSON_AddStringToObject(x, "dtype", "float32");
    cJSON *shape = cJSON_AddArrayToObject(x, "shape");
    cJSON_AddItemToArray(shape, cJSON_CreateNumber(64));
    cJSON_AddBoolToObject(x, "output", a->args[i].is_output);
  }
  cJSON *b = cJSON_AddObjectToObject(art, "bytes");
  cJSON_AddNumberToObject(b, "offset", 0);
  cJSON_AddNumberToObject(b, "length", (double)a->n_bytes);
  return h;
}

/* The artifact object of candidate 0. */
static cJSON *art_of(cJSON *h) {
  return cJSON_GetObjectItem(
      cJSON_GetArrayItem(cJSON_GetObjectItem(h, "candidates"), 0), "artifact");
}

/* A binary frame: magic, the header length (declared, may lie), JSON,
 * payload. */
static void frame(buf *body, const char *json, uint32_t declared,
                  const void *payload, size_t n) {
  puts_(body, "TSB1");
  unsigned char len[4] = {
      (unsigned char)(declared >> 24), (unsigned char)(declared >> 16),
      (unsigned char)(declared >> 8), (unsigned char)declared};
  put(body, len, 4);
  puts_(body, json);
  if (n) put(body, payload, n);
}

/* An HTTP request with a body; auth "" for none. */
static void request(buf *out, const char *method, const char *path,
                    const char *auth, const buf *body, const char *extra) {
  putf(out, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n", method, path);
  if (auth && *auth) putf(out, "Authorization: %s\r\n", auth);
  if (extra) puts_(out, extra);
  if (body) {
    putf(out,
         "Content-Type: application/x-tessera\r\nContent-Length: %zu\r\n\r\n",
         body->n);
    put(out, body->p, body->n);
  } else {
    puts_(out, "\r\n");
  }
}

#define BEARER "Bearer " TOKEN

/* Builds hostile request number k into req; sets *closed_ok when closing
 * the connection without an answer is acceptable. */
static void hostile(fixture *f, int k, buf *req, bool *closed_ok) {
  *closed_ok = false;
  buf body = {0};
  cJSON *h = valid_head(f->add);
  const unsigned char *obj = f->add->bytes;
  size_t on = f->add->n_bytes;
  char *json = NULL;
  int variant = k / 40;
  switch (k % 40) {
  case 0: /* no token */
    request(req, "GET", "/v1/info", NULL, NULL, NULL);
    break;
  case 1: /* wrong token (different lengths) */ {
    char t[64];
    snprintf(t, sizeof t, "Bearer %.*s", variant + 1,
             "xxxxxxxxxxxxxxxxxxxxxxx");
    request(req, "GET", "/v1/info", t, NULL, NULL);
    break;
  }
  case 2: /* a prefix of the token */
    request(req, "GET", "/v1/info", "Bearer hostile-test", NULL, NULL);
    break;
  case 3: /* other scheme */
    request(req, "GET", "/v1/info", "Basic aG9zdGlsZTp0ZXN0", NULL, NULL);
    break;
  case 4: /* the token but no auth on measure with a valid body */
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", NULL, &body, NULL);
    break;
  case 5: /* bad JSON */
    frame(&body, "{\"protocol\": 1, \"candidates\": [", 31, obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  case 6: /* wrong protocol version */
    cJSON_ReplaceItemInObject(h, "protocol", cJSON_CreateNumber(2 + variant));
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  case 7: /* no protocol field */
    cJSON_DeleteItemFromObject(h, "protocol");
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  case 8: /* protocol header mismatch */
    request(req, "GET", "/v1/info", BEARER, NULL, "Tessera-Protocol: 7\r\n");
    break;
  case 9: /* frame header length past the end (truncated frame) */
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json) + 1000, NULL, 0);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  case 10: /* artifact bytes truncated */
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on / 2);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  case 11: /* huge declared JSON header length */
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, 0xffffffffu - (uint32_t)variant, obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  case 12: /* huge declared Content-Length */
    putf(req,
         "POST /v1/measure HTTP/1.1\r\nHost: x\r\nAuthorization: " BEARER
         "\r\nContent-Length: %llu\r\n\r\nTSB1",
         1000000000000000ULL + (unsigned long long)variant);
    break;
  case 13: /* Content-Length over the body limit */
    putf(req,
         "PUT /v1/reference/r HTTP/1.1\r\nHost: x\r\nAuthorization: " BEARER
         "\r\nContent-Length: %d\r\n\r\n",
         (1 << 20) + 1);
    break;
  case 14: /* HTTP-level truncated body: the client stops sending */
    putf(req, "POST /v1/measure HTTP/1.1\r\nHost: x\r\nAuthorization: " BEARER
              "\r\nContent-Length: 5000\r\n\r\nTSB1\x00\x00\x00");
    *closed_ok = true;
    break;
  case 15: /* oversized headers */ {
    putf(req,
         "GET /v1/info HTTP/1.1\r\nHost: x\r\nAuthorization: " BEARER "\r\n");
    for (int i = 0; i < 12 + variant; i++) {
      putf(req, "X-Pad-%d: ", i);
      for (int j = 0; j < 1000; j++) puts_(req, "a");
      puts_(req, "\r\n");
    }
    puts_(req, "\r\n");
    *closed_ok = true; /* the server may reset before the client reads */
    break;
  }
  case 16: /* artifact length over the artifact limit */
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(art_of(h), "bytes"), "length",
                              cJSON_CreateNumber(1e15));
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  case 17: /* artifact offset past the payload */
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(art_of(h), "bytes"), "offset",
                              cJSON_CreateNumber(1 << 19));
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  case 18: /* negative offset */
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(art_of(h), "bytes"), "offset",
                              cJSON_CreateNumber(-8));
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  case 19: /* bad dtype */
    cJSON_ReplaceItemInObject(
        cJSON_GetArrayItem(cJSON_GetObjectItem(art_of(h), "args"), 0), "dtype",
        cJSON_CreateString(variant % 2 ? "float32x4" : "handle"));
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  case 20: /* too many dimensions */ {
    cJSON *shape = cJSON_CreateArray();
    for (int i = 0; i < 40; i++)
      cJSON_AddItemToArray(shape, cJSON_CreateNumber(2));
    cJSON_ReplaceItemInObject(
        cJSON_GetArrayItem(cJSON_GetObjectItem(art_of(h), "args"), 0), "shape",
        shape);
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  }
  case 21: /* negative / huge / fractional extent */ {
    double v[] = {-1, 1e30, 2.5, 1e12};
    cJSON *shape = cJSON_CreateArray();
    cJSON_AddItemToArray(shape, cJSON_CreateNumber(v[variant % 4]));
    cJSON_AddItemToArray(shape, cJSON_CreateNumber(1e12));
    cJSON_ReplaceItemInObject(
        cJSON_GetArrayItem(cJSON_GetObjectItem(art_of(h), "args"), 0), "shape",
        shape);
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  }
  case 22: /* candidates not an array */
    cJSON_ReplaceItemInObject(h, "candidates", cJSON_CreateString("all"));
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  case 23: /* empty candidates */
    cJSON_ReplaceItemInObject(h, "candidates", cJSON_CreateArray());
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  case 24: /* too many candidates */ {
    cJSON *cands = cJSON_GetObjectItem(h, "candidates");
    for (int i = 1; i < 40; i++) {
      cJSON *c = cJSON_Duplicate(cJSON_GetArrayItem(cands, 0), true);
      cJSON_ReplaceItemInObject(c, "id", cJSON_CreateNumber(i));
      cJSON_AddItemToArray(cands, c);
    }
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  }
  case 25: /* duplicate ids */ {
    cJSON *cands = cJSON_GetObjectItem(h, "candidates");
    cJSON_AddItemToArray(cands,
                         cJSON_Duplicate(cJSON_GetArrayItem(cands, 0), true));
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  }
  case 26: /* an entry symbol that is a path */
    cJSON_ReplaceItemInObject(art_of(h), "entry",
                              cJSON_CreateString("../../etc/passwd; rm -rf /"));
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  case 27: /* unknown artifact kind */
    cJSON_ReplaceItemInObject(art_of(h), "kind", cJSON_CreateString("shell"));
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  case 28: /* bad configs */ {
    const char *field[] = {"timeout_ms", "repeat", "number", "warmup",
                           "threads"};
    double value[] = {0, 1000, -1, 1e9, 1e7};
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(h, "config"),
                              field[variant % 5],
                              cJSON_CreateNumber(value[variant % 5]));
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  }
  case 29: /* seed text that is not a number */
    cJSON_AddStringToObject(cJSON_GetObjectItem(h, "config"), "seed", "12ab");
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  case 30: /* deeply nested JSON */ {
    buf deep = {0};
    puts_(&deep, "{\"protocol\":1,\"x\":");
    for (int i = 0; i < 3000; i++) puts_(&deep, "[");
    for (int i = 0; i < 3000; i++) puts_(&deep, "]");
    puts_(&deep, "}");
    frame(&body, deep.p, (uint32_t)deep.n, NULL, 0);
    free(deep.p);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  }
  case 31: /* trailing garbage after the JSON header */
    json = cJSON_PrintUnformatted(h);
    {
      buf j2 = {0};
      puts_(&j2, json);
      puts_(&j2, "}}garbage");
      frame(&body, j2.p, (uint32_t)j2.n, obj, on);
      free(j2.p);
    }
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  case 32: /* not a binary frame at all */
    puts_(&body, "{\"protocol\":1,\"candidates\":[]}");
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  case 33: /* unknown reference */
    cJSON_AddStringToObject(h, "reference", "never-uploaded");
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  case 34: /* bad reference ids in the path */ {
    const char *paths[] = {
        "/v1/reference/a%2Fb", "/v1/reference/", "/v1/reference/x y",
        "/v1/reference/"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "aaaaaaaaaaaaaaaaaaaaa"};
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "PUT", paths[variant % 4], BEARER, &body, NULL);
    break;
  }
  case 35: /* a reference that is not an object file kind */ {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "protocol", 1);
    cJSON *a = cJSON_Duplicate(art_of(h), true);
    cJSON_ReplaceItemInObject(a, "kind", cJSON_CreateString("ptx"));
    cJSON_AddItemToObject(r, "artifact", a);
    json = cJSON_PrintUnformatted(r);
    cJSON_Delete(r);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "PUT", "/v1/reference/ref1", BEARER, &body, NULL);
    break;
  }
  case 36: /* unknown path and wrong method */
    request(req, variant % 2 ? "DELETE" : "GET",
            variant % 2 ? "/v1/measure" : "/../../etc/passwd", BEARER, NULL,
            NULL);
    break;
  case 37: /* garbage instead of HTTP */
    put(req, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 15);
    *closed_ok = true;
    break;
  case 38: /* bad Content-Length */
    putf(req, "POST /v1/measure HTTP/1.1\r\nHost: x\r\nAuthorization: " BEARER
              "\r\nContent-Length: -5\r\n\r\n");
    *closed_ok = true;
    break;
  case 39: /* a wrong-typed field everywhere */ {
    cJSON_ReplaceItemInObject(art_of(h), "args", cJSON_CreateNumber(3));
    json = cJSON_PrintUnformatted(h);
    frame(&body, json, (uint32_t)strlen(json), obj, on);
    request(req, "POST", "/v1/measure", BEARER, &body, NULL);
    break;
  }
  }
  free(json);
  free(body.p);
  cJSON_Delete(h);
}

/* The answer each case must get (0: the connection is closed unanswered
 * when the client cuts its request short or sends no HTTP at all). */
static const int expected[40] = {
    401, 401, 401, 401, 401, 400, 400, 400, 400, 400, /* 0-9 */
    400, 413, 413, 413, 0,   431, 413, 400, 400, 400, /* 10-19 */
    400, 400, 400, 400, 413, 400, 400, 400, 400, 400, /* 20-29 */
    400, 400, 400, 404, 400, 400, 404, 0,   400, 400, /* 30-39 */
};

static void test_500_hostile_requests(void **state) {
  fixture *f = *state;
  static char reply[1 << 16];
  int answered = 0, counts[600] = {0};
  for (int k = 0; k < 500; k++) {
    buf req = {0};
    bool closed_ok = false;
    hostile(f, k, &req, &closed_ok);
    int status = raw_http(f->port, req.p, req.n, true, reply, sizeof reply);
    free(req.p);
    int want = expected[k % 40];
    if (k % 40 == 36 && (k / 40) % 2) want = 405; /* DELETE /v1/measure */
    if (status == 0 && closed_ok) continue;
    if (status != want && !(closed_ok && status >= 400 && status < 500))
      fail_msg("request %d (case %d): status %d, want %d: %.300s", k, k % 40,
               status, want, reply);
    counts[status]++;
    answered++;
    /* Errors we answer ourselves are JSON with a reason. */
    char *body = strstr(reply, "\r\n\r\n");
    if (body && strstr(reply, "application/json"))
      assert_non_null(strstr(body, "\"error\""));
  }
  assert_true(answered >= 450);
  assert_true(counts[401] >= 50);
  assert_true(counts[400] >= 200);
  assert_true(counts[413] >= 30);
  assert_true(counts[404] >= 12);
  /* Still healthy: info and a real measurement. */
  char *json = NULL;
  ts_error err;
  ts_error_clear(&err);
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%d", f->port);
  assert_int_equal(ts_rpc_get_json(addr, "/v1/info", TOKEN, 5000, &json, &err),
                   TS_OK);
  free(json);
  ts_rpc_runner_options o = ts_rpc_runner_defaults();
  const char *ws[1] = {addr};
  o.workers = ws;
  o.n_workers = 1;
  o.token = TOKEN;
  ts_runner *r = NULL;
  assert_int_equal(ts_runner_rpc_create(&o, &r, &err), TS_OK);
  assert_int_equal(ts_runner_set_reference(r, "add", f->add, &err), TS_OK);
  ts_measure_config c = fast_config(5000);
  ts_artifact *cands[2] = {f->add, f->add};
  ts_measure_result res[2];
  assert_int_equal(ts_runner_measure(r, &c, "add", cands, 2, res, &err), TS_OK);
  assert_int_equal(res[0].status, TS_MEASURE_OK);
  assert_int_equal(res[1].status, TS_MEASURE_OK);
  ts_runner_destroy(r);
}

/* The hand-made valid frame is accepted: the hostile cases differ from a
 * good request only where they say. */
static void test_valid_frame_accepted(void **state) {
  fixture *f = *state;
  static char reply[1 << 16];
  cJSON *h = valid_head(f->add);
  char *json = cJSON_PrintUnformatted(h);
  buf body = {0}, req = {0};
  frame(&body, json, (uint32_t)strlen(json), f->add->bytes, f->add->n_bytes);
  request(&req, "POST", "/v1/measure", BEARER, &body, NULL);
  /* The write side stays open: a client that shuts it has gone away, and
   * its measurement is cancelled (test_http.c). */
  int status = raw_http(f->port, req.p, req.n, false, reply, sizeof reply);
  assert_int_equal(status, 200);
  assert_non_null(strstr(reply, "\"status\":\"ok\""));
  free(json);
  free(body.p);
  free(req.p);
  cJSON_Delete(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_valid_frame_accepted),
      cmocka_unit_test(test_500_hostile_requests),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
