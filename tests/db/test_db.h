/*
 * test_db.h — where the database tests keep their databases. By default a
 * file in a new temporary directory (SQLite). With TS_TEST_DB_URL (a
 * postgresql:// URL) or TS_TEST_DB_URL_FILE (a file holding one, written
 * by tests/db/pg_server.sh) in the environment, each database is a new
 * empty schema on that PostgreSQL server instead, so the same tests run
 * against both backends. When TS_TEST_DB_URL_FILE names a file that was not
 * written because the server binaries are absent, the test exits 77
 * (skipped) quoting the reason.
 */
#ifndef TESSERA_TEST_DB_H
#define TESSERA_TEST_DB_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The server's URL, or NULL when the tests run on SQLite files. */
static inline const char *test_server_url(void) {
  static char url[1024];
  static int state; /* 0 unknown, 1 server, 2 files */
  if (state) return state == 1 ? url : NULL;
  const char *direct = getenv("TS_TEST_DB_URL");
  const char *file = getenv("TS_TEST_DB_URL_FILE");
  state = 2;
  if (direct && direct[0]) {
    snprintf(url, sizeof url, "%s", direct);
    state = 1;
  } else if (file && file[0]) {
    FILE *f = fopen(file, "r");
    if (!f) {
      /* pg_server.sh leaves the reason beside the URL file */
      char skip[1100], reason[512] = "the test server did not start";
      snprintf(skip, sizeof skip, "%.*s/skip",
               (int)(strrchr(file, '/') ? strrchr(file, '/') - file : 1),
               strrchr(file, '/') ? file : ".");
      FILE *s = fopen(skip, "r");
      if (s) {
        if (fgets(reason, sizeof reason, s)) reason[strcspn(reason, "\n")] = 0;
        fclose(s);
        printf("skipped: PostgreSQL tests: %s\n", reason);
        exit(77);
      }
      fprintf(stderr, "PostgreSQL tests: no server URL in %s: %s\n", file,
              reason);
      exit(1);
    }
    if (fgets(url, sizeof url, f)) url[strcspn(url, "\r\n")] = 0;
    fclose(f);
    state = url[0] ? 1 : 2;
  }
  return state == 1 ? url : NULL;
}

static inline bool test_on_server(void) { return test_server_url() != NULL; }

/* Runs SQL on the server at url (tests only); false with the message on
 * stderr. */
static inline void test_quiet_notice(void *arg, const char *msg) {
  (void)arg;
  (void)msg;
}

static inline bool test_server_exec(const char *url, const char *sql) {
  PGconn *c = PQconnectdb(url);
  bool ok = PQstatus(c) == CONNECTION_OK;
  if (ok) {
    PQsetNoticeProcessor(c, test_quiet_notice, NULL);
    PGresult *r = PQexec(c, sql);
    ok = PQresultStatus(r) == PGRES_COMMAND_OK ||
         PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok) fprintf(stderr, "%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
  } else {
    fprintf(stderr, "connect: %s", PQerrorMessage(c));
  }
  PQfinish(c);
  return ok;
}

/* The first column of the first row of a query on the server (tests only);
 * -1 on failure. */
static inline long long test_server_int(const char *url, const char *sql) {
  PGconn *c = PQconnectdb(url);
  long long v = -1;
  if (PQstatus(c) == CONNECTION_OK) {
    PGresult *r = PQexec(c, sql);
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0)
      v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    else
      fprintf(stderr, "%s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
  } else {
    fprintf(stderr, "connect: %s", PQerrorMessage(c));
  }
  PQfinish(c);
  return v;
}

/* A URL of the server that works in `schema`. */
static inline void test_schema_url(const char *schema, char *out, size_t cap) {
  const char *base = test_server_url();
  int n = snprintf(out, cap, "%s%soptions=-csearch_path%%3D%s", base,
                   strchr(base, '?') ? "&" : "?", schema);
  if (n < 0 || (size_t)n >= cap) {
    fprintf(stderr, "test server URL too long\n");
    exit(1);
  }
}

/* Where a new empty database goes: dir/name on SQLite; on a server, a new
 * schema named after the test, the process and a counter. */
static inline void test_fresh_db(const char *dir, const char *name, char *out,
                                 size_t cap) {
  if (!test_on_server()) {
    snprintf(out, cap, "%s/%s", dir, name);
    return;
  }
  static int counter;
  char schema[96], sql[400];
  size_t k = 0;
  for (const char *p = name; *p && k < 40; p++)
    schema[k++] =
        (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ? *p : '_';
  snprintf(schema + k, sizeof schema - k, "_%ld_%d", (long)getpid(), ++counter);
  char fresh[110];
  snprintf(fresh, sizeof fresh, "t_%s", schema);
  snprintf(sql, sizeof sql,
           "DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s", fresh, fresh);
  if (!test_server_exec(test_server_url(), sql)) {
    fprintf(stderr, "cannot create schema %s on the test server\n", fresh);
    exit(1);
  }
  test_schema_url(fresh, out, cap);
}

#endif /* TESSERA_TEST_DB_H */
