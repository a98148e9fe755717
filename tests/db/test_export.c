/*
 * test_export.c — JSON Lines export and import: export -> import into an
 * empty database -> export gives the same bytes (traces, probe figures and
 * job configurations stored compactly or not, odd strings, every status,
 * jobs and trial indexes, failed records without times, measurement
 * contexts nested, as strings or null); importing into a
 * database that already has the workloads, targets, jobs and records
 * reuses them and adds no record twice; record lines of older exports
 * without "measure" import with none, and sync copies it;
 * and every malformed input names its line and field and leaves the
 * database unchanged, even when the bad line is the last one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/db.h"
#include "test_db.h"

#define T_SKX "llvm -mcpu=skylake-avx512 -num-cores=2"
#define T_CUDA "cuda -arch=sm_80"

typedef struct fixture {
  char dir[256];
  char a[300], b[300];
} fixture;

static int setup(void **state) {
  fixture *fx = calloc(1, sizeof *fx);
  snprintf(fx->dir, sizeof fx->dir, "%s/ts-db-export-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(fx->dir)) return -1;
  test_fresh_db(fx->dir, "export_a.db", fx->a, sizeof fx->a);
  test_fresh_db(fx->dir, "export_b.db", fx->b, sizeof fx->b);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fixture *fx = *state;
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
  if (system(cmd) != 0) return -1;
  free(fx);
  return 0;
}

static ts_db *open_db(const char *path) {
  ts_db *db;
  ts_error err;
  if (ts_db_open(path, NULL, &db, &err) != TS_OK) fail_msg("%s", err.msg);
  return db;
}

static int64_t commit_spec(ts_db *db, const char *spec, const char *name) {
  ts_workload *w;
  ts_error err;
  assert_int_equal(ts_workload_from_spec(spec, &w, &err), TS_OK);
  int64_t id;
  assert_int_equal(ts_db_commit_workload(db, w->func, name, &id), TS_OK);
  ts_workload_free(w);
  return id;
}

/* Everything the export format carries. */
static void populate(ts_db *db) {
  int64_t w1 = commit_spec(db, "matmul M=64 N=64 K=64", "mm64");
  int64_t w2 = commit_spec(db,
                           "conv2d_nhwc N=1 H=8 W=8 CI=4 CO=8 KH=3 KW=3 "
                           "pad=1",
                           "conv \"small\"");
  commit_spec(db, "softmax N=4 D=16", "never measured");
  int64_t t1;
  assert_int_equal(ts_db_commit_target(db, T_SKX, &t1), TS_OK);
  assert_int_equal(ts_db_set_target_probe(db, t1,
                                          "{\"fp32_gflops\":[1234.5,2469],"
                                          "\"bw_gbs\":20.25}"),
                   TS_OK);
  int64_t t2;
  assert_int_equal(ts_db_commit_target(db, T_CUDA, &t2), TS_OK);
  /* stored with spaces: exported as a string to keep the bytes */
  assert_int_equal(ts_db_set_target_probe(db, t2, "{ \"sm\": 80 }"), TS_OK);
  int64_t j1, j2;
  assert_int_equal(
      ts_db_job_create(db, "job one", "{\"trials\":64,\"seed\":7}", 64, &j1),
      TS_OK);
  assert_int_equal(ts_db_job_create(db, "job two", "{ }", 8, &j2), TS_OK);
  assert_int_equal(ts_db_job_finish(db, j2, TS_DB_JOB_FINISHED), TS_OK);
  double secs[] = {1.25e-4, 1.5e-4, 1.0000000000000002e-4, 3e-3, 0.1, 7};
  const char *traces[] = {
      "{\"version\":1,\"insts\":[{\"kind\":\"split\",\"inputs\":[\"l0\"],"
      "\"attrs\":{\"factors\":[4,16]},\"outputs\":[\"l1\",\"l2\"]}],"
      "\"decisions\":[[0,[4,16]]]}",
      "{\n  \"version\": 1,\n  \"insts\": []\n}",      /* pretty: string */
      "{\"version\":1,\"seed\":18446744073709551615}", /* beyond a double */
      "{\"version\":1,\"note\":\"caf\xc3\xa9 \\u00e9 \\\"q\\\" \\\\ \\t\"}",
  };
  /* measurement contexts: compact (nested on export), spaced (a string),
   * none */
  const char *how[] = {
      "{\"number\":1,\"repeat\":3,\"min_repeat_ms\":10,\"warmup\":0,"
      "\"flush_cache\":false,\"threads\":2,\"timeout_ms\":2000,"
      "\"cpus\":\"0-1\"}",
      "{ \"threads\": 1 }",
      NULL,
  };
  ts_db_measurement m[12];
  int n = 0;
  for (int i = 0; i < 12; i++) {
    ts_db_status st = (ts_db_status)(i % TS_DB_N_STATUS);
    m[n++] = (ts_db_measurement){
        .workload_id = i % 3 == 2 ? w2 : w1,
        .target = i % 4 == 3 ? T_CUDA : T_SKX,
        .trace_json = traces[i % 4],
        .run_secs = &secs[i % 3],
        .n_run_secs = st == TS_DB_STATUS_OK ? 1 + i % 3 : (i % 2 ? 0 : 2),
        .status = st,
        .error = st == TS_DB_STATUS_OK ? NULL : "line one\nline \"two\"\ttab",
        .job_id = i < 6   ? j1
                  : i < 9 ? j2
                          : 0,
        .worker = i % 2 ? "cuda:0" : NULL,
        .measure_json = how[i % 3],
    };
  }
  assert_int_equal(ts_db_commit_records(db, m, n, NULL), TS_OK);
}

static char *export_to_string(ts_db *db, size_t *len) {
  char *buf = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&buf, &size);
  assert_non_null(f);
  int rc = ts_db_export(db, f);
  if (rc) fail_msg("export: %s", ts_db_errmsg(db));
  fclose(f);
  if (len) *len = size;
  return buf;
}

static FILE *file_of(const char *text) {
  FILE *f = tmpfile();
  assert_non_null(f);
  fputs(text, f);
  rewind(f);
  return f;
}

static void test_round_trip(void **state) {
  fixture *fx = *state;
  ts_db *a = open_db(fx->a);
  populate(a);
  size_t n1, n2;
  char *first = export_to_string(a, &n1);

  ts_db *b = open_db(fx->b);
  FILE *in = file_of(first);
  ts_db_import_stats st;
  int rc = ts_db_import(b, in, "first.jsonl", &st);
  if (rc) fail_msg("import: %s", ts_db_errmsg(b));
  fclose(in);
  assert_int_equal(st.records, 12);
  assert_int_equal(st.workloads_new, 3);
  assert_int_equal(st.targets_new, 2);
  assert_int_equal(st.jobs_new, 2);
  assert_int_equal(
      st.workloads_existing + st.targets_existing + st.jobs_existing, 0);
  assert_int_equal(st.lines, 1 + 2 + 3 + 2 + 12);
  char *second = export_to_string(b, &n2);
  assert_int_equal(n1, n2);
  assert_string_equal(first, second);

  /* the format: a header, then each kind in order, one object per line */
  char header[128];
  snprintf(header, sizeof header,
           "{\"format\":\"tessera-db\",\"format_version\":1,"
           "\"schema_version\":%d,\"tessera\":\"",
           TS_DB_SCHEMA_VERSION);
  assert_non_null(strstr(first, header));
  assert_non_null(strstr(first, "\"probe\":{\"fp32_gflops\":[1234.5,2469],"
                                "\"bw_gbs\":20.25}"));
  assert_non_null(strstr(first, "\"probe\":\"{ \\\"sm\\\": 80 }\""));
  assert_non_null(strstr(first, "\"trace\":{\"version\":1,\"insts\":[{"));
  assert_non_null(strstr(first, "\"trace\":\"{\\n  \\\"version\\\": 1"));
  assert_non_null(strstr(first, "18446744073709551615"));
  assert_non_null(strstr(first, "\"job\":null,\"trial\":null"));
  assert_non_null(strstr(first, "\"measure\":{\"number\":1,\"repeat\":3,"
                                "\"min_repeat_ms\":10,\"warmup\":0,"
                                "\"flush_cache\":false,\"threads\":2,"
                                "\"timeout_ms\":2000,\"cpus\":\"0-1\"},"
                                "\"trace\":"));
  assert_non_null(
      strstr(first, "\"measure\":\"{ \\\"threads\\\": 1 }\",\"trace\":"));
  assert_non_null(strstr(first, "\"measure\":null,\"trace\":"));
  for (const char *p = first; *p; p++) assert_true(*p != '\t');

  /* the contents agree record by record */
  ts_db_record *ra, *rb;
  int na, nb;
  assert_int_equal(ts_db_records_of(a, 1, T_SKX, &ra, &na), TS_OK);
  assert_int_equal(ts_db_records_of(b, 1, T_SKX, &rb, &nb), TS_OK);
  assert_int_equal(na, nb);
  assert_true(na > 3);
  for (int i = 0; i < na; i++) {
    assert_string_equal(ra[i].trace_json, rb[i].trace_json);
    assert_int_equal(ra[i].n_run_secs, rb[i].n_run_secs);
    for (int k = 0; k < ra[i].n_run_secs; k++)
      assert_true(ra[i].run_secs[k] == rb[i].run_secs[k]);
    assert_true((isnan(ra[i].median_s) && isnan(rb[i].median_s)) ||
                ra[i].median_s == rb[i].median_s);
    assert_int_equal(ra[i].status, rb[i].status);
    assert_string_equal(ra[i].error, rb[i].error);
    assert_string_equal(ra[i].worker, rb[i].worker);
    assert_string_equal(ra[i].created, rb[i].created);
    assert_int_equal(ra[i].trial, rb[i].trial);
    assert_int_equal(ra[i].job_id != 0, rb[i].job_id != 0);
    if (ra[i].measure_json)
      assert_string_equal(ra[i].measure_json, rb[i].measure_json);
    else
      assert_null(rb[i].measure_json);
  }
  ts_db_records_free(ra, na);
  ts_db_records_free(rb, nb);
  ts_db_job j;
  assert_int_equal(ts_db_job_get(b, "job two", &j), TS_OK);
  assert_int_equal(j.state, TS_DB_JOB_FINISHED);
  assert_int_equal(j.trials_done, 3);
  assert_int_equal(j.trials_budget, 8);
  assert_string_equal(j.config_json, "{ }");
  ts_db_job_clear(&j);

  /* importing again into a database that has it all: everything reused,
   * no record added twice (test_reimport.c) */
  in = file_of(first);
  assert_int_equal(ts_db_import(a, in, "again", &st), TS_OK);
  fclose(in);
  assert_int_equal(st.workloads_existing, 3);
  assert_int_equal(st.targets_existing, 2);
  assert_int_equal(st.jobs_existing, 2);
  assert_int_equal(st.workloads_new + st.targets_new + st.jobs_new, 0);
  assert_int_equal(st.records, 0);
  assert_int_equal(st.records_existing, 12);
  ts_db_stats s;
  assert_int_equal(ts_db_get_stats(a, &s), TS_OK);
  assert_int_equal(s.n_records, 12);
  assert_int_equal(s.n_workloads, 3);
  /* an existing job keeps its own counts */
  assert_int_equal(ts_db_job_get(a, "job one", &j), TS_OK);
  assert_int_equal(j.trials_done, 6);
  ts_db_job_clear(&j);

  free(first);
  free(second);
  ts_db_close(a);
  ts_db_close(b);
}

/* Each bad input: the error names the line and the problem, and the
 * database is exactly as before. */
static void test_import_errors(void **state) {
  fixture *fx = *state;
  ts_db *a = open_db(fx->a);
  populate(a);
  char *good = export_to_string(a, NULL);
  ts_db *b = open_db(fx->b);
  /* b already holds one workload so "unchanged" is not just "empty" */
  commit_spec(b, "matmul M=16 N=16 K=16", "resident");
  char *before = export_to_string(b, NULL);

  /* the good export's lines */
  char *lines[64];
  int n = 0;
  char *copy = strdup(good);
  for (char *p = strtok(copy, "\n"); p && n < 64; p = strtok(NULL, "\n"))
    lines[n++] = p;
  assert_int_equal(n, 20);
  int first_record = 8; /* header, 2 targets, 3 workloads, 2 jobs */
  assert_non_null(strstr(lines[first_record], "\"type\":\"record\""));
  assert_non_null(strstr(lines[3], "\"type\":\"workload\""));

  struct {
    int line;         /* 1-based line to replace (0: append) */
    const char *text; /* replacement */
    const char *want; /* in the message */
  } cases[] = {
      {20,
       "{\"type\":\"record\",\"workload\":1,\"target\":1,\"job\":null,"
       "\"trial\":null,\"status\":\"ok\",\"run_secs\":[1e-3],\"median_s\":"
       "1e-3,\"error\":\"\",\"worker\":\"\",\"tessera\":\"0.1.0\","
       "\"created\":\"x\",\"trace\":{\"insts\":[]}}",
       "t.jsonl:20: field \"trace\": trace JSON has no \"version\" field"},
      {20,
       "{\"type\":\"record\",\"workload\":1,\"target\":1,\"job\":null,"
       "\"trial\":null,\"status\":\"ok\",\"run_secs\":[1e-3],\"median_s\":"
       "1e-3,\"error\":\"\",\"worker\":\"\",\"tessera\":\"0.1.0\","
       "\"created\":\"x\",\"trace\":\"{\\\"version\\\":1,\"}",
       "t.jsonl:20: field \"trace\": trace JSON is corrupt"},
      {9, "{\"type\":\"record\",\"workload\":9", "t.jsonl:9: not valid JSON"},
      {9, "[1,2]", "t.jsonl:9: expected a JSON object"},
      {1, "{\"format\":\"something-else\",\"format_version\":1}",
       "not a tessera database export"},
      {1, "{\"format\":\"tessera-db\",\"format_version\":7}",
       "export format version 7 is not supported"},
      {2, "{\"type\":\"planet\"}",
       "t.jsonl:2: field \"type\": unknown line type"},
      {2, "{\"id\":1}", "t.jsonl:2: field \"type\": missing"},
      {2, "{\"type\":\"target\",\"id\":1,\"target\":\"lvm\",\"created\":\"x\"}",
       "t.jsonl:2: field \"target\": bad target 'lvm'"},
      {3,
       "{\"type\":\"target\",\"id\":1,\"target\":\"cuda -arch=sm_90\","
       "\"created\":\"x\"}",
       "t.jsonl:3: field \"id\": 1 appears twice"},
      {9,
       "{\"type\":\"record\",\"workload\":9,\"target\":1,\"job\":null,"
       "\"trial\":null,\"status\":\"ok\",\"run_secs\":[1e-3],\"median_s\":"
       "1e-3,\"error\":\"\",\"worker\":\"\",\"tessera\":\"0.1.0\","
       "\"created\":\"x\",\"trace\":{\"version\":1}}",
       "t.jsonl:9: field \"workload\": no workload with id 9 on an earlier "
       "line"},
      {9,
       "{\"type\":\"record\",\"workload\":1,\"target\":1,\"job\":null,"
       "\"trial\":null,\"status\":\"great\",\"run_secs\":[1e-3],\"median_s\":"
       "1e-3,\"error\":\"\",\"worker\":\"\",\"tessera\":\"0.1.0\","
       "\"created\":\"x\",\"trace\":{\"version\":1}}",
       "t.jsonl:9: field \"status\": unknown status 'great'"},
      {9,
       "{\"type\":\"record\",\"workload\":1,\"target\":1,\"job\":null,"
       "\"trial\":1.5,\"status\":\"ok\",\"run_secs\":[1e-3],\"median_s\":"
       "1e-3,\"error\":\"\",\"worker\":\"\",\"tessera\":\"0.1.0\","
       "\"created\":\"x\",\"trace\":{\"version\":1}}",
       "t.jsonl:9: field \"trial\": 1.5 is not an integer"},
      {9,
       "{\"type\":\"record\",\"workload\":1,\"target\":1,\"job\":null,"
       "\"trial\":null,\"status\":\"ok\",\"run_secs\":[\"fast\"],"
       "\"median_s\":1e-3,\"error\":\"\",\"worker\":\"\",\"tessera\":"
       "\"0.1.0\",\"created\":\"x\",\"trace\":{\"version\":1}}",
       "t.jsonl:9: field \"run_secs\": expected an array of numbers"},
      {9,
       "{\"type\":\"record\",\"workload\":1,\"target\":1,\"job\":null,"
       "\"trial\":null,\"status\":\"ok\",\"run_secs\":[1e-3],\"median_s\":"
       "1e-3,\"error\":\"\",\"worker\":\"\",\"tessera\":\"0.1.0\","
       "\"created\":\"x\",\"measure\":[2],\"trace\":{\"version\":1}}",
       "t.jsonl:9: field \"measure\" is not a JSON object"},
      {20,
       "{\"type\":\"record\",\"workload\":1,\"target\":1,\"job\":null,"
       "\"trial\":null,\"status\":\"ok\",\"run_secs\":[1e-3],\"median_s\":"
       "1e-3,\"error\":\"\",\"worker\":\"\",\"tessera\":\"0.1.0\","
       "\"created\":\"x\",\"measure\":\"{\\\"threads\\\":\","
       "\"trace\":{\"version\":1}}",
       "t.jsonl:20: field \"measure\" is not valid JSON"},
      {9,
       "{\"type\":\"record\",\"workload\":1,\"target\":1,\"job\":null,"
       "\"trial\":null,\"status\":\"ok\",\"run_secs\":[1e-3],\"median_s\":"
       "1e-3,\"error\":\"\",\"worker\":\"\",\"tessera\":\"0.1.0\","
       "\"created\":\"x\",\"measure\":7,\"trace\":{\"version\":1}}",
       "t.jsonl:9: field \"measure\": expected a JSON object"},
      {7,
       "{\"type\":\"job\",\"id\":1,\"name\":\"j\",\"config\":[1],\"state\":"
       "\"running\",\"started\":\"x\",\"finished\":null,\"trials_budget\":1,"
       "\"trials_done\":0}",
       "t.jsonl:7: field \"config\" is not a JSON object"},
      {7,
       "{\"type\":\"job\",\"id\":1,\"name\":\"j\",\"config\":{},\"state\":"
       "\"napping\",\"started\":\"x\",\"finished\":null,\"trials_budget\":1,"
       "\"trials_done\":0}",
       "t.jsonl:7: field \"state\": unknown job state 'napping'"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    FILE *f = tmpfile();
    for (int i = 0; i < n; i++)
      fprintf(f, "%s\n", i + 1 == cases[c].line ? cases[c].text : lines[i]);
    rewind(f);
    int rc = ts_db_import(b, f, "t.jsonl", NULL);
    fclose(f);
    assert_int_equal(rc, TS_EINVAL);
    if (!strstr(ts_db_errmsg(b), cases[c].want))
      fail_msg("case %zu: '%s' lacks '%s'", c, ts_db_errmsg(b), cases[c].want);
    assert_int_equal(ts_db_error(b)->line, cases[c].line);
    char *after = export_to_string(b, NULL);
    assert_string_equal(before, after);
    free(after);
  }

  /* a TIR whose hash is not the stated one (edited by hand) */
  FILE *f = tmpfile();
  for (int i = 0; i < n; i++) {
    if (i == 3) {
      char *edited = strdup(lines[i]);
      char *h = strstr(edited, "\"hash\":\"") + 8;
      h[0] = h[0] == '0' ? '1' : '0';
      fprintf(f, "%s\n", edited);
      free(edited);
    } else {
      fprintf(f, "%s\n", lines[i]);
    }
  }
  rewind(f);
  assert_int_equal(ts_db_import(b, f, "t.jsonl", NULL), TS_EINVAL);
  fclose(f);
  assert_non_null(strstr(ts_db_errmsg(b), "t.jsonl:4: field \"hash\""));
  assert_non_null(
      strstr(ts_db_errmsg(b), "does not match the structural hash"));
  /* a TIR that does not parse */
  f = file_of("{\"format\":\"tessera-db\",\"format_version\":1}\n"
              "{\"type\":\"workload\",\"id\":1,\"hash\":\"00\",\"name\":\"x\","
              "\"flops\":1,\"created\":\"x\",\"tir\":\"func f(\"}\n");
  assert_int_equal(ts_db_import(b, f, "t.jsonl", NULL), TS_EINVAL);
  fclose(f);
  assert_non_null(strstr(ts_db_errmsg(b), "t.jsonl:2: field \"tir\""));
  /* empty input */
  f = file_of("");
  assert_int_equal(ts_db_import(b, f, "empty.jsonl", NULL), TS_EINVAL);
  fclose(f);
  assert_non_null(strstr(ts_db_errmsg(b), "empty file"));
  char *after = export_to_string(b, NULL);
  assert_string_equal(before, after);
  free(after);

  /* blank lines and CRLF endings are fine */
  f = tmpfile();
  for (int i = 0; i < n; i++) fprintf(f, "%s\r\n\n", lines[i]);
  rewind(f);
  assert_int_equal(ts_db_import(b, f, "t.jsonl", NULL), TS_OK);
  fclose(f);

  free(copy);
  free(good);
  free(before);
  ts_db_close(a);
  ts_db_close(b);
}

/* A record line of an older export has no "measure" field, or null: it
 * imports with none; an object or a string holding one imports as its
 * text, and exports again as it came. */
static void test_measure_field(void **state) {
  fixture *fx = *state;
  ts_db *a = open_db(fx->a);
  int64_t w = commit_spec(a, "matmul M=8 N=8 K=8", "mm8");
  (void)w;
  char *empty = export_to_string(a, NULL);
  /* header, target-less: the workload line is the second */
  char *workload = strchr(empty, '\n') + 1;
  char *end = strchr(workload, '\n');
  *end = 0;
  char text[8192];
  const char *rec =
      "{\"type\":\"record\",\"workload\":1,\"target\":1,\"job\":null,"
      "\"trial\":null,\"status\":\"ok\",\"run_secs\":[%s],\"median_s\":%s,"
      "\"error\":\"\",\"worker\":\"\",\"tessera\":\"0.1.0\","
      "\"created\":\"2025-01-01T00:00:00.000Z\",%s\"trace\":{\"version\":1}}"
      "\n";
  char r1[600], r2[600], r3[600], r4[600];
  snprintf(r1, sizeof r1, rec, "1e-3", "1e-3", "");
  snprintf(r2, sizeof r2, rec, "2e-3", "2e-3", "\"measure\":null,");
  snprintf(r3, sizeof r3, rec, "3e-3", "3e-3",
           "\"measure\":{\"threads\":2,\"cpus\":null},");
  snprintf(r4, sizeof r4, rec, "4e-3", "4e-3",
           "\"measure\":\"{ \\\"cpus\\\": \\\"0,2-3\\\" }\",");
  snprintf(text, sizeof text,
           "{\"format\":\"tessera-db\",\"format_version\":1,"
           "\"schema_version\":3,\"tessera\":\"0.1.0\"}\n"
           "{\"type\":\"target\",\"id\":1,\"target\":\"%s\",\"probe\":null,"
           "\"probed\":null,\"created\":\"2025-01-01T00:00:00.000Z\"}\n"
           "%s\n%s%s%s%s",
           T_SKX, workload, r1, r2, r3, r4);
  ts_db *b = open_db(fx->b);
  FILE *in = file_of(text);
  ts_db_import_stats st;
  int rc = ts_db_import(b, in, "old.jsonl", &st);
  fclose(in);
  if (rc) fail_msg("import: %s", ts_db_errmsg(b));
  assert_int_equal(st.records, 4);
  ts_db_record *r;
  int n;
  assert_int_equal(ts_db_records_of(b, 1, T_SKX, &r, &n), TS_OK);
  assert_int_equal(n, 4);
  assert_null(r[0].measure_json);
  assert_null(r[1].measure_json);
  assert_string_equal(r[2].measure_json, "{\"threads\":2,\"cpus\":null}");
  assert_string_equal(r[3].measure_json, "{ \"cpus\": \"0,2-3\" }");
  ts_db_records_free(r, n);
  /* exported: null, the object nested, the spaced text as a string */
  char *out = export_to_string(b, NULL);
  assert_non_null(strstr(out, "\"run_secs\":[0.001],\"median_s\":0.001,"));
  const char *p = strstr(out, "\"measure\":null,\"trace\"");
  assert_non_null(p);
  assert_non_null(strstr(p + 1, "\"measure\":null,\"trace\""));
  assert_non_null(
      strstr(out, "\"measure\":{\"threads\":2,\"cpus\":null},\"trace\""));
  assert_non_null(
      strstr(out, "\"measure\":\"{ \\\"cpus\\\": \\\"0,2-3\\\" }\",\"trace\""));
  /* and sync copies it */
  ts_db *c;
  char path_c[300];
  test_fresh_db(fx->dir, "export_c.db", path_c, sizeof path_c);
  ts_error err;
  assert_int_equal(ts_db_open(path_c, NULL, &c, &err), TS_OK);
  assert_int_equal(ts_db_sync(b, c, T_SKX, &st), TS_OK);
  assert_int_equal(st.records, 4);
  char *synced = export_to_string(c, NULL);
  assert_string_equal(out, synced);
  free(synced);
  free(out);
  free(empty);
  ts_db_close(c);
  ts_db_close(a);
  ts_db_close(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_import_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_measure_field, setup, teardown),
  };
  test_server_url(); /* exits 77 when the server was meant but is absent */
  return cmocka_run_group_tests(tests, NULL, NULL);
}
