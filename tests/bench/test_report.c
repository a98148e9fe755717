/*
 * test_report.c — the tuning report (ts_bench_report_write) on databases
 * filled here with known values: the summary row's numbers (best latency,
 * GFLOP/s, % of the probed peak and of the roofline, the vendor ratio,
 * records and failures by status), the tuning curve's vertices and dots,
 * the failure ticks, vendor levels, the histogram's bar counts, the best
 * trace in readable form (or its JSON and the reason when it does not
 * parse); every database string HTML-escaped; an empty database, a workload
 * with only failures and one with no records; a workload filter; 100,000
 * records drawn in a bounded number of SVG elements; the roofline of each
 * target (its roofs from the probe figures, the points of tessera and the
 * vendors at the workload's arithmetic intensity, colours and legend, the
 * note of a target not probed); the best schedule's lowered loops (or why
 * there are none); the JSON form of the report. Every SVG fragment is
 * checked to be well formed. The peak rules are checked on their own.
 * Finally the page is rendered by headless Chromium (a screenshot and the
 * parsed DOM); that test is skipped, saying why, when chromium is absent.
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
#include <sys/stat.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/internal.h"
#include "../schedule/oom_walk.h"

#include <cjson/cJSON.h>

#define T_SKX "llvm -mcpu=skylake-avx512 -num-cores=2"
#define TRACE                                                                  \
  "{\"version\":1,\"instructions\":[{\"kind\":\"get_block\",\"inputs\":[],"    \
  "\"attrs\":[\"C\"],\"outputs\":[\"b0\"]}],\"decisions\":[]}"
#define EVIL "mm<script>alert(\"x\")</script>&'"
#define EVIL_ESCAPED                                                           \
  "mm&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;"

typedef struct fixture {
  char dir[256];
  char path[300];
  ts_db *db;
} fixture;

static int setup(void **state) {
  fixture *fx = calloc(1, sizeof *fx);
  snprintf(fx->dir, sizeof fx->dir, "%s/ts-report-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(fx->dir)) return -1;
  snprintf(fx->path, sizeof fx->path, "%s/t.db", fx->dir);
  ts_error err;
  if (ts_db_open(fx->path, NULL, &fx->db, &err) != TS_OK) {
    fprintf(stderr, "open: %s\n", err.msg);
    return -1;
  }
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  fixture *fx = *state;
  ts_db_close(fx->db);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
  if (system(cmd) != 0) return -1;
  free(fx);
  return 0;
}

static int64_t commit_spec(ts_db *db, const char *spec, const char *name) {
  ts_workload *w;
  ts_error err;
  if (ts_workload_from_spec(spec, &w, &err) != TS_OK) fail_msg("%s", err.msg);
  int64_t id = 0;
  if (ts_db_commit_workload(db, w->func, name, &id))
    fail_msg("commit: %s", ts_db_errmsg(db));
  ts_workload_free(w);
  return id;
}

/* One record: ok with one run time, or a failure (secs ignored). */
static void add(ts_db *db, int64_t w, int64_t job, ts_db_status status,
                double secs, const char *trace, const char *worker) {
  ts_db_measurement m = {.workload_id = w,
                         .target = T_SKX,
                         .trace_json = trace ? trace : TRACE,
                         .run_secs = &secs,
                         .n_run_secs = status == TS_DB_STATUS_BUILD_ERROR ||
                                               status == TS_DB_STATUS_TIMEOUT
                                           ? 0
                                           : 1,
                         .status = status,
                         .job_id = job,
                         .worker = worker};
  if (ts_db_commit_record(db, &m, NULL))
    fail_msg("record: %s", ts_db_errmsg(db));
}

/* One ok record of workload w on `target`. */
static void add_on(ts_db *db, int64_t w, const char *target, double secs) {
  ts_db_measurement m = {.workload_id = w,
                         .target = target,
                         .trace_json = TRACE,
                         .run_secs = &secs,
                         .n_run_secs = 1,
                         .status = TS_DB_STATUS_OK};
  if (ts_db_commit_record(db, &m, NULL))
    fail_msg("record: %s", ts_db_errmsg(db));
}

static char *report(ts_db *db, const ts_bench_report_options *o,
                    ts_bench_report_stats *stats) {
  char *buf = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&buf, &size);
  assert_non_null(f);
  ts_error err;
  ts_error_clear(&err);
  int rc = ts_bench_report_write(db, o, f, stats, &err);
  fclose(f);
  if (rc) fail_msg("report: %s", err.msg);
  if (stats) assert_int_equal(stats->bytes, (int64_t)size);
  return buf;
}

static ts_bench_report_options quiet(void) {
  ts_bench_report_options o = ts_bench_report_defaults();
  o.timestamp = false;
  return o;
}

static int count(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

/* The text of a section, from `id="task-N"` to its end (malloc'd). */
static char *task_section(const char *html, int n) {
  char id[32];
  snprintf(id, sizeof id, "id=\"task-%d\"", n);
  const char *a = strstr(html, id);
  assert_non_null(a);
  const char *b = strstr(a, "</section>");
  assert_non_null(b);
  return strndup(a, (size_t)(b - a));
}

/* The value of the integer attribute `attr` on the first element that
 * starts with `start` (e.g. "<polyline class=\"best\""); -1 if absent. */
static long attr_int(const char *s, const char *start, const char *attr) {
  const char *p = strstr(s, start);
  if (!p) return -1;
  const char *end = strchr(p, '>');
  char key[64];
  snprintf(key, sizeof key, " %s=\"", attr);
  const char *a = strstr(p, key);
  if (!a || a > end) return -1;
  return strtol(a + strlen(key), NULL, 10);
}

/* ---- a small XML check of the SVG fragments ---- */

/* An entity reference at p (&amp; &lt; &gt; &quot; &#NN;): its length. */
static size_t entity_len(const char *p) {
  static const char *const names[] = {"&amp;", "&lt;", "&gt;", "&quot;"};
  for (int i = 0; i < 4; i++)
    if (!strncmp(p, names[i], strlen(names[i]))) return strlen(names[i]);
  if (p[1] == '#') {
    size_t n = 2;
    while (p[n] >= '0' && p[n] <= '9') n++;
    if (n > 2 && p[n] == ';') return n + 1;
  }
  return 0;
}

/* Checks the fragment starting at "<svg": tags nest and close in order,
 * attribute values are quoted, '&' only starts references and no '<'
 * appears in text or values. Returns the position after </svg>. */
static const char *check_svg(const char *p) {
  const char *stack[64];
  int depth = 0;
  do {
    while (*p && *p != '<') {
      if (*p == '&' && !entity_len(p))
        fail_msg("bare '&' in SVG text: %.40s", p);
      p++;
    }
    assert_true(*p == '<');
    if (p[1] == '/') {
      const char *name = p + 2;
      size_t n = strcspn(name, ">");
      assert_true(depth > 0);
      const char *open = stack[--depth];
      if (strncmp(open, name, n) || (open[n] != ' ' && open[n] != '>'))
        fail_msg("</%.*s> closes <%.20s", (int)n, name, open);
      p = name + n + 1;
      continue;
    }
    const char *name = p + 1;
    p = name + strcspn(name, " />");
    for (;;) {
      while (*p == ' ' || *p == '\n') p++;
      if (*p == '>' || !strncmp(p, "/>", 2)) break;
      size_t n = strcspn(p, "=");
      assert_true(n > 0 && p[n] == '=' && p[n + 1] == '"');
      p += n + 2;
      while (*p != '"') {
        assert_true(*p && *p != '<');
        if (*p == '&' && !entity_len(p))
          fail_msg("bare '&' in an attribute: %.40s", p);
        p++;
      }
      p++;
    }
    if (*p == '>') {
      assert_true(depth < 64);
      stack[depth++] = name;
      p++;
    } else {
      p += 2;
    }
  } while (depth > 0);
  return p;
}

static int check_svgs(const char *html) {
  int n = 0;
  for (const char *p = html; (p = strstr(p, "<svg "));) {
    p = check_svg(p);
    n++;
  }
  return n;
}

/* The vertices of the first best-so-far polyline in s. */
static int best_points(const char *s, double *xs, double *ys, int cap) {
  const char *p = strstr(s, "<polyline class=\"best\"");
  if (!p) return 0;
  p = strstr(p, "points=\"");
  assert_non_null(p);
  p += 8;
  int n = 0;
  while (*p != '"') {
    char *end;
    double x = strtod(p, &end);
    assert_true(*end == ',');
    double y = strtod(end + 1, &end);
    assert_true(n < cap);
    xs[n] = x;
    ys[n++] = y;
    p = end;
    while (*p == ' ') p++;
  }
  return n;
}

/* The sum of the counts in the histogram bars' titles ("...: N"). */
static long histogram_total(const char *s) {
  const char *h = strstr(s, "<svg class=\"chart histogram\"");
  assert_non_null(h);
  const char *end = strstr(h, "</svg>");
  long total = 0;
  for (const char *p = h; (p = strstr(p, "<rect ")) && p < end; p++) {
    const char *t = strstr(p, "</title>");
    const char *colon = t;
    while (colon > p && *colon != ':') colon--;
    total += strtol(colon + 1, NULL, 10);
  }
  return total;
}

/* ---- tests ---- */

static void test_peaks(void **state) {
  (void)state;
  const char *probe =
      "{\"fp32_gflops_all_cores\": 150, \"fp32_gflops_per_core\": 80, "
      "\"fp64_gflops_per_core\": 40, \"amx_bf16_tops\": 1.5, "
      "\"mem_bandwidth_gbs\": 20}";
  ts_bench_peak p = ts_bench_peak_of(probe, TS_FLOAT32, 2);
  assert_true(p.gflops == 150);
  assert_string_equal(p.source, "fp32_gflops_all_cores");
  assert_true(p.bandwidth_gbs == 20);
  p = ts_bench_peak_of(probe, TS_FLOAT64, 4);
  assert_true(p.gflops == 160);
  assert_string_equal(p.source, "fp64_gflops_per_core x 4");
  p = ts_bench_peak_of(probe, TS_BFLOAT16, 2);
  assert_true(p.gflops == 1500);
  p = ts_bench_peak_of(probe, TS_INT8, 2); /* no amx_int8_tops */
  assert_true(isnan(p.gflops));
  assert_true(p.bandwidth_gbs == 20);
  p = ts_bench_peak_of("{\"fp32_gflops_per_core\": 80}", TS_FLOAT32, 3);
  assert_true(p.gflops == 240);
  assert_string_equal(p.source, "fp32_gflops_per_core x 3");
  /* AMX figures per core (as `tessera probe` stores them) */
  p = ts_bench_peak_of("{\"amx_bf16_tflops_per_core\": 2.5, "
                       "\"amx_int8_tops_per_core\": 5}",
                       TS_BFLOAT16, 2);
  assert_true(p.gflops == 5000);
  assert_string_equal(p.source, "amx_bf16_tflops_per_core x 2");
  p = ts_bench_peak_of("{\"amx_int8_tops_per_core\": 5}", TS_UINT8, 2);
  assert_true(p.gflops == 10000);
  p = ts_bench_peak_of("{\"fp32_gflops_per_core\": 80}", TS_BFLOAT16, 2);
  assert_true(isnan(p.gflops)); /* not measured against the fp32 peak */
  /* no figures: not probed, malformed, not numbers, not positive */
  const char *none[] = {NULL,
                        "",
                        "{",
                        "[1]",
                        "{\"fp32_gflops_all_cores\":\"x\"}",
                        "{\"fp32_gflops_all_cores\":-1}"};
  for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
    p = ts_bench_peak_of(none[i], TS_FLOAT32, 2);
    assert_true(isnan(p.gflops));
    assert_true(isnan(p.bandwidth_gbs));
  }
  /* the roofline: the lower of compute and flops/bytes * bandwidth */
  p = (ts_bench_peak){100, 10, ""};
  assert_true(ts_bench_roofline_gflops(&p, 1000, 100) == 100);
  assert_true(ts_bench_roofline_gflops(&p, 1000, 1000) == 10);
  p.bandwidth_gbs = NAN;
  assert_true(isnan(ts_bench_roofline_gflops(&p, 1000, 100)));
}

static void test_empty(void **state) {
  fixture *fx = *state;
  ts_bench_report_options o = quiet();
  ts_bench_report_stats st;
  char *html = report(fx->db, &o, &st);
  assert_int_equal(st.workloads, 0);
  assert_int_equal(st.tasks, 0);
  assert_int_equal(st.records, 0);
  assert_true(!strncmp(html, "<!DOCTYPE html>\n", 16));
  assert_non_null(strstr(html, "<title>tessera tuning report</title>"));
  assert_non_null(strstr(html, "holds no workloads yet"));
  assert_null(strstr(html, "<table class=\"summary"));
  assert_null(strstr(html, "made 2")); /* no timestamp */
  assert_int_equal(check_svgs(html), 0);
  assert_non_null(strstr(html, "</body>\n</html>\n"));
  free(html);
  /* with the timestamp */
  html = report(fx->db, NULL, NULL);
  assert_non_null(strstr(html, " UTC by tessera "));
  free(html);
}

/* Known records -> known numbers. FLOPs of matmul 64^3: 524288. */
static void fill_known(fixture *fx, int64_t *mm, int64_t *only_failed) {
  ts_db *db = fx->db;
  *mm = commit_spec(db, "matmul M=64 N=64 K=64", EVIL);
  *only_failed = commit_spec(db, "softmax N=4 D=8", "sm");
  commit_spec(db, "matmul M=8 N=4 K=2", "never_measured");
  int64_t job;
  assert_int_equal(ts_db_job_create(db, "night<ly>", NULL, 10, &job), TS_OK);
  add(db, *mm, job, TS_DB_STATUS_OK, 1e-3, NULL, "w0"); /* 0.524 GFLOP/s */
  add(db, *mm, job, TS_DB_STATUS_BUILD_ERROR, 0, NULL, "w0");
  add(db, *mm, job, TS_DB_STATUS_OK, 5e-4, NULL, "w<1>"); /* 1.048576 */
  add(db, *mm, job, TS_DB_STATUS_TIMEOUT, 0, NULL, "w0");
  add(db, *mm, job, TS_DB_STATUS_WRONG_RESULT, 1e-4, NULL,
      "w0"); /* never best */
  add(db, *mm, job, TS_DB_STATUS_OK, 2e-3, NULL, "w0");
  add(db, *only_failed, 0, TS_DB_STATUS_BUILD_ERROR, 0, NULL, "w0");
  add(db, *only_failed, 0, TS_DB_STATUS_BUILD_ERROR, 0, NULL, "w0");
  int64_t target;
  assert_int_equal(ts_db_find_target(db, T_SKX, &target), TS_OK);
  /* peak 10.48576: the best is 10.0% of it; the roofline: 3 buffers of
   * 16 KiB moved for 524288 FLOPs at 0.5 GB/s bound 5.33 GFLOP/s */
  assert_int_equal(
      ts_db_set_target_probe(db, target,
                             "{\"fp32_gflops_all_cores\": 10.48576, "
                             "\"mem_bandwidth_gbs\": 0.5, \"note<\": 1}"),
      TS_OK);
  assert_int_equal(
      ts_db_baseline_put(db, *mm, T_SKX, "<b>vendor</b>", 2, 2.097152), TS_OK);
}

static void test_known_values(void **state) {
  fixture *fx = *state;
  int64_t mm, only_failed;
  fill_known(fx, &mm, &only_failed);
  ts_bench_report_options o = quiet();
  o.title = "tuning <i>report</i>";
  ts_bench_report_stats st;
  char *html = report(fx->db, &o, &st);
  assert_int_equal(st.workloads, 3);
  assert_int_equal(st.tasks, 2);
  assert_int_equal(st.records, 8);

  /* escaping: nothing from the database reaches the page as markup */
  assert_null(strstr(html, "<script"));
  assert_null(strstr(html, "<b>vendor"));
  assert_null(strstr(html, "<i>report"));
  assert_non_null(strstr(html, "<title>tuning &lt;i&gt;report&lt;/i&gt;"));
  /* summary, section, and the tooltips of its two roofline points */
  assert_int_equal(count(html, EVIL_ESCAPED), 4);
  assert_non_null(strstr(html, "&lt;b&gt;vendor&lt;/b&gt;"));
  assert_non_null(strstr(html, "job night&lt;ly&gt; trial 2"));
  assert_non_null(strstr(html, "worker w&lt;1&gt;"));
  assert_non_null(strstr(html, "note&lt; = 1"));

  /* the summary row of the matmul */
  const char *row = strstr(html, "<tr><td class=\"num\"><a href=\"#task-1\">");
  assert_non_null(row);
  char *line = strndup(row, strcspn(row, "\n"));
  assert_non_null(strstr(line, "<td class=\"num\">500 µs</td>"));
  assert_non_null(strstr(line, "<td class=\"num\">1.05</td>"));
  assert_non_null(strstr(line, "<td class=\"num peak\">10.0%</td>"));
  assert_non_null(strstr(line, "<td class=\"num roofline\">19.7%</td>"));
  assert_non_null(strstr(line, "2.1 <span class=\"ratio\" title=\"two "
                               "figures measured apart"));
  assert_non_null(strstr(line, "(×0.50, apart)</span>"));
  assert_non_null(strstr(line, "<td class=\"num\">6</td><td class=\"num\">3"
                               "</td><td class=\"failed\">1 build_error, 1 "
                               "timeout, 1 wrong_result</td>"));
  assert_non_null(strstr(line, "title=\"llvm -mcpu=skylake-avx512"));
  free(line);
  /* the columns are shown: some row has a peak, a roofline, a vendor */
  assert_non_null(strstr(html, "<table class=\"summary\">"));

  /* the workload with only failures, and the one never measured */
  row = strstr(html, "<a href=\"#task-2\">");
  assert_non_null(row);
  line = strndup(row, strcspn(row, "\n"));
  assert_non_null(strstr(line, ">sm</td>"));
  assert_non_null(strstr(line, "<td class=\"num\">—</td><td class=\"num\">—"
                               "</td>"));
  assert_non_null(strstr(line, "<td class=\"num\">2</td><td class=\"num\">0"
                               "</td><td class=\"failed\">2 build_error</td>"));
  free(line);
  row = strstr(html, ">never_measured</td>");
  assert_non_null(row);
  assert_non_null(strstr(row, "no records"));
  assert_null(strstr(html, "id=\"task-3\""));

  /* the matmul's section */
  char *sec = task_section(html, 1);
  assert_non_null(strstr(sec, "6 measurements: 3 ok, failed: 1 build_error, "
                              "1 timeout, 1 wrong_result"));
  assert_non_null(strstr(sec, "best: 500 µs · 1.05 GFLOP/s · 10.0% of peak "
                              "(10.5 GFLOP/s, fp32_gflops_all_cores)"));
  /* the headline says which figure it is: nothing confirmed here */
  assert_non_null(strstr(sec, "(search-time figure, not confirmed: "));
  assert_non_null(strstr(sec, "the search-time best against this figure"));
  assert_null(strstr(sec, "confirmed: median of"));
  assert_non_null(strstr(sec, "float32"));
  assert_non_null(strstr(sec, "524.3 kFLOP"));
  /* the curve: 3 dots, failures, the vendor level, the running best
   * stepping up at measurement 2 and running to the last one */
  assert_int_equal(attr_int(sec, "<g class=\"trials\"", "data-count"), 3);
  assert_int_equal(count(sec, "<circle "), 3);
  assert_int_equal(attr_int(sec, "<path class=\"fail\"", "data-count"), 3);
  assert_int_equal(count(strstr(sec, "<path class=\"fail\""), "v7"), 3);
  assert_non_null(strstr(sec, "<g class=\"level\">"));
  assert_non_null(strstr(sec, "&lt;b&gt;vendor&lt;/b&gt; 2t 2.1</text>"));
  double xs[16], ys[16];
  int nv = best_points(sec, xs, ys, 16);
  assert_int_equal(nv, 4);
  assert_int_equal(attr_int(sec, "<polyline class=\"best\"", "data-count"), 4);
  assert_true(xs[0] < xs[1] && xs[1] == xs[2] && xs[2] < xs[3]);
  assert_true(ys[0] == ys[1] && ys[2] < ys[1] && ys[2] == ys[3]);
  assert_true(xs[0] >= 0 && xs[3] <= 720 && ys[2] >= 0 && ys[0] <= 300);
  /* 1.048576 is twice 0.524288: from the axis (y of 0) the heights agree */
  double axis = 14 + (300 - 14 - 46);
  assert_true(fabs((axis - ys[2]) - 2 * (axis - ys[0])) < 0.2);
  /* the vendor level (2.097152) is twice the best: a line at that height */
  const char *lvl = strstr(sec, "<g class=\"level\"><line x1=\"");
  assert_non_null(lvl);
  double ly = strtod(strstr(lvl, "y1=\"") + 4, NULL);
  assert_true(fabs((axis - ly) - 2 * (axis - ys[2])) < 0.2);
  /* the histogram: the 3 ok latencies (the wrong result is not counted) */
  assert_int_equal(histogram_total(sec), 3);
  assert_non_null(strstr(sec, "best 500 µs"));
  /* 0.25 ms (the vendor) to 2 ms spans 8x: still a linear axis */
  assert_non_null(strstr(sec, ">median latency</text>"));
  /* the best trace in readable form, escaped */
  assert_non_null(strstr(sec, "b0 = get_block(name=&quot;C&quot;)"));
  /* its lowered loops: flat buffers, a loop nest */
  const char *low = strstr(sec, "<details class=\"lowered\"><summary>lowered "
                                "loops of the best schedule (");
  assert_non_null(low);
  assert_non_null(strstr(low, "<pre>func matmul(A: float32[4096]"));
  assert_non_null(strstr(low, "for i in range(64)"));
  assert_int_equal(check_svgs(html), 5); /* 2 curves, 2 histograms, roofline */
  assert_non_null(strstr(sec, "<details class=\"tir\">"));
  assert_non_null(strstr(sec, "func "));
  free(sec);

  /* only failures: an empty curve and histogram, no best schedule */
  sec = task_section(html, 2);
  assert_int_equal(count(sec, "no successful measurement"), 3);
  assert_int_equal(attr_int(sec, "<path class=\"fail\"", "data-count"), 2);
  assert_null(strstr(sec, "<polyline"));
  assert_null(strstr(sec, "<circle"));
  assert_null(strstr(sec, "best schedule"));
  free(sec);

  free(html);
}

static void test_unparsable_trace_and_filter(void **state) {
  fixture *fx = *state;
  int64_t a = commit_spec(fx->db, "matmul M=8 N=8 K=8", "odd_trace");
  commit_spec(fx->db, "matmul M=16 N=16 K=16", "other");
  /* passes the database's check (a version) but is no trace */
  add(fx->db, a, 0, TS_DB_STATUS_OK, 1e-6,
      "{\"version\":1,\"note\":\"<img src=x>\"}", "");
  ts_bench_report_options o = quiet();
  o.workload = "odd_trace";
  ts_bench_report_stats st;
  char *html = report(fx->db, &o, &st);
  assert_int_equal(st.workloads, 1);
  assert_int_equal(st.tasks, 1);
  assert_null(strstr(html, ">other<"));
  assert_non_null(strstr(html, "the trace does not parse: "));
  assert_non_null(strstr(html, "&quot;note&quot;:&quot;&lt;img src=x&gt;"));
  assert_null(strstr(html, "<img"));
  /* no probe, no vendor: those columns are hidden */
  assert_non_null(
      strstr(html, "<table class=\"summary no-peak no-roofline no-vendor\">"));
  /* no lowered loops without a trace */
  assert_null(strstr(html, "lowered loops"));
  assert_int_equal(check_svgs(html), 3);
  free(html);

  /* a trace that parses but does not apply: no lowered loops, the reason */
  int64_t c = commit_spec(fx->db, "matmul M=4 N=4 K=4", "bad_apply");
  add(fx->db, c, 0, TS_DB_STATUS_OK, 1e-6,
      "{\"version\":1,\"instructions\":[{\"kind\":\"get_block\",\"inputs\":"
      "[],\"attrs\":[\"no<such>\"],\"outputs\":[\"b0\"]}],\"decisions\":[]}",
      "");
  o.workload = "bad_apply";
  html = report(fx->db, &o, NULL);
  const char *low = strstr(html, "<details class=\"lowered\">");
  assert_non_null(low);
  assert_non_null(strstr(low, "<p class=\"warn\">cannot lower it: "));
  assert_null(strstr(html, "no<such>"));
  assert_int_equal(check_svgs(html), 3);
  free(html);

  /* an unknown workload is an error naming it */
  o.workload = "nosuch";
  char *buf = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&buf, &size);
  ts_error err;
  ts_error_clear(&err);
  assert_int_equal(ts_bench_report_write(fx->db, &o, f, NULL, &err),
                   TS_ENOTFOUND);
  assert_non_null(strstr(err.msg, "nosuch"));
  fclose(f);
  free(buf);
}

/* 100,000 records: bounded SVG, exact summary. */
static void test_many_records(void **state) {
  fixture *fx = *state;
  int64_t w = commit_spec(fx->db, "matmul M=64 N=64 K=64", "big");
  enum { N = 100000, BATCH = 5000 };
  ts_db_measurement *m = calloc(BATCH, sizeof *m);
  double *secs = calloc(BATCH, sizeof *secs);
  uint64_t x = 12345;
  double fastest = INFINITY;
  int64_t n_ok = 0;
  for (int done = 0; done < N; done += BATCH) {
    for (int i = 0; i < BATCH; i++) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      secs[i] = 1e-4 * (1 + (double)(x >> 40) / (double)(1ull << 24) * 50);
      bool failed = (done + i) % 17 == 5;
      m[i] = (ts_db_measurement){.workload_id = w,
                                 .target = T_SKX,
                                 .trace_json = TRACE,
                                 .run_secs = &secs[i],
                                 .n_run_secs = failed ? 0 : 1,
                                 .status = failed ? TS_DB_STATUS_RUN_ERROR
                                                  : TS_DB_STATUS_OK};
      if (!failed) {
        n_ok++;
        if (secs[i] < fastest) fastest = secs[i];
      }
    }
    if (ts_db_commit_records(fx->db, m, BATCH, NULL))
      fail_msg("commit: %s", ts_db_errmsg(fx->db));
  }
  free(m);
  free(secs);
  ts_bench_report_options o = quiet();
  ts_bench_report_stats st;
  char *html = report(fx->db, &o, &st);
  assert_int_equal(st.records, N);
  size_t size = strlen(html);
  print_message("100000 records: report of %zu bytes\n", size);
  assert_true(size < 150 * 1024);
  char want[96];
  snprintf(want, sizeof want,
           "<td class=\"num\">%lld</td><td class=\"num\">"
           "%lld</td>",
           (long long)N, (long long)n_ok);
  assert_non_null(strstr(html, want));
  assert_non_null(strstr(html, "5883 run_error"));
  /* the best latency in the summary is the fastest ok record */
  char gf[32];
  snprintf(gf, sizeof gf, "%.3g", 524288 / fastest * 1e-9);
  snprintf(want, sizeof want, "<td class=\"num\">%s</td>", gf);
  assert_non_null(strstr(html, want));
  /* dots became 500 min-max bars; the curve stays small */
  const char *curve = strstr(html, "<svg class=\"chart curve\"");
  assert_non_null(curve);
  char *curve_svg = strndup(curve, (size_t)(strstr(curve, "</svg>") - curve));
  assert_int_equal(count(curve_svg, "<circle"), 0);
  free(curve_svg);
  assert_int_equal(attr_int(html, "<path class=\"trial-range\"", "data-count"),
                   n_ok);
  assert_int_equal(
      attr_int(html, "<path class=\"trial-range\"", "data-buckets"), 500);
  long vertices = attr_int(html, "<polyline class=\"best\"", "data-count");
  assert_true(vertices >= 2 && vertices <= 2 * 1000 + 1);
  double xs[2100], ys[2100];
  assert_int_equal(best_points(html, xs, ys, 2100), vertices);
  for (long i = 1; i < vertices; i++)
    assert_true(xs[i] >= xs[i - 1] && ys[i] <= ys[i - 1]);
  assert_int_equal(histogram_total(html), n_ok);
  assert_true(count(html, "<rect ") <= 40);
  assert_non_null(strstr(html, "median latency (log scale)")); /* 51x */
  assert_int_equal(check_svgs(html), 3);
  free(html);
}

/* The roofline section of a target (malloc'd), from its id to its end. */
static char *roofline_section(const char *html, int64_t target_id) {
  char id[48];
  snprintf(id, sizeof id, "id=\"roofline-%lld\"", (long long)target_id);
  const char *a = strstr(html, id);
  assert_non_null(a);
  const char *b = strstr(a, "</section>");
  assert_non_null(b);
  return strndup(a, (size_t)(b - a));
}

/* A number attribute (` name="..."`) of the element starting at p. */
static double attr_num(const char *p, const char *name) {
  char key[32];
  snprintf(key, sizeof key, " %s=\"", name);
  const char *a = strstr(p, key);
  assert_non_null(a);
  assert_true(a < strchr(p, '>'));
  return strtod(a + strlen(key), NULL);
}

#define T_OTHER "llvm -mcpu=skylake-avx512 -num-cores=4"
#define EVIL_VENDOR "<b>v</b>"

static void test_roofline(void **state) {
  fixture *fx = *state;
  ts_db *db = fx->db;
  /* matmul 64^3: 524288 FLOPs over 3 x 16 KiB = 10.67 FLOP/byte; softmax
   * 4 x 8: 0.625 FLOP/byte */
  int64_t mm = commit_spec(db, "matmul M=64 N=64 K=64", "mm");
  int64_t sm = commit_spec(db, "softmax N=4 D=8", "sm");
  add(db, mm, 0, TS_DB_STATUS_OK, 5e-4, NULL, "w0"); /* 1.048576 GFLOP/s */
  add(db, sm, 0, TS_DB_STATUS_OK, 1e-6, NULL, "w0");
  add_on(db, mm, T_OTHER, 1e-3);
  int64_t target, other;
  assert_int_equal(ts_db_find_target(db, T_SKX, &target), TS_OK);
  assert_int_equal(ts_db_find_target(db, T_OTHER, &other), TS_OK);
  assert_int_equal(
      ts_db_set_target_probe(
          db, target,
          "{\"fp32_gflops_all_cores\": 100, \"fp32_gflops_all_cores_512\": "
          "100, \"fp32_gflops_all_cores_256\": 60, "
          "\"amx_bf16_tflops_per_core\": 2, \"mem_copy_gbs\": 10, "
          "\"mem_triad_gbs\": 12, \"mem_bandwidth_gbs\": 12}"),
      TS_OK);
  /* a vendor exactly at the 512-bit roof, one with a hostile name */
  assert_int_equal(ts_db_baseline_put(db, mm, T_SKX, "onednn", 2, 100), TS_OK);
  assert_int_equal(ts_db_baseline_put(db, mm, T_SKX, EVIL_VENDOR, 1, 0.5),
                   TS_OK);
  ts_bench_report_options o = quiet();
  char *html = report(db, &o, NULL);
  assert_int_equal(count(html, "<svg class=\"chart roofline\""), 2);
  assert_null(strstr(html, EVIL_VENDOR));
  assert_int_equal(check_svgs(html), 8);

  char *sec = roofline_section(html, target);
  /* the roofs: one per vector width (not the all-cores figure again), the
   * AMX peak (2 TFLOP/s per core x 2 cores), copy and triad (the
   * bandwidth figure repeats the triad) */
  assert_non_null(strstr(sec, ">fp32 FMA, 512-bit vectors 100 GFLOP/s<"));
  assert_non_null(strstr(sec, ">fp32 FMA, 256-bit vectors 60 GFLOP/s<"));
  assert_non_null(strstr(sec, ">bf16 AMX 4000 GFLOP/s<"));
  assert_null(strstr(sec, ">fp32 FMA 100"));
  assert_int_equal(count(sec, "<g class=\"roof compute\">"), 3);
  assert_non_null(strstr(sec, ">memory copy 10 GB/s<"));
  assert_non_null(strstr(sec, ">memory triad 12 GB/s<"));
  assert_int_equal(count(sec, "<g class=\"roof memory\">"), 2);
  /* the points: tessera on both workloads, the two vendors on the matmul */
  assert_int_equal(attr_int(sec, "<g class=\"points\"", "data-count"), 4);
  assert_int_equal(count(sec, "<circle class=\"pt\""), 4);
  const char *p_mm = strstr(sec, "<a href=\"#task-1\"><circle class=\"pt\" "
                                 "data-series=\"0\"");
  const char *p_sm = strstr(sec, "<a href=\"#task-3\"><circle class=\"pt\" "
                                 "data-series=\"0\"");
  assert_non_null(p_mm);
  assert_non_null(p_sm);
  p_mm = strstr(p_mm, "<circle"), p_sm = strstr(p_sm, "<circle");
  /* x: log10(10.67 / 0.625) = 1.23 decades apart, decades 1/(x1-x0) of
   * the plot */
  double dx = attr_num(p_mm, "cx") - attr_num(p_sm, "cx");
  assert_true(dx > 0);
  const char *grid = strstr(sec, "<g class=\"axis x\">");
  const char *g1 = strstr(strstr(grid, "<line class=\"grid\""), "/>");
  double decade = attr_num(strstr(g1, "<line class=\"grid\""), "x1") -
                  attr_num(strstr(grid, "<line class=\"grid\""), "x1");
  assert_true(fabs(dx / decade - log10((524288.0 / 49152) / 0.625)) < 0.01);
  /* y: the vendor at 100 GFLOP/s lies on the 512-bit roof; tessera's
   * 1.048576 two decades lower (log10(100 / 1.048576) = 1.98) */
  const char *onednn = strstr(sec, "fill=\"#8250df\"><title>#1 mm: onednn");
  assert_non_null(onednn);
  while (strncmp(onednn, "<circle", 7)) onednn--;
  const char *roof = strstr(sec, "<g class=\"roof compute\"><line");
  double roof_y = attr_num(strstr(roof, "<line"), "y1");
  assert_true(fabs(attr_num(onednn, "cy") - roof_y) < 0.11);
  const char *ygrid = strstr(sec, "<g class=\"axis y\">");
  const char *y1 = strstr(strstr(ygrid, "<line class=\"grid\""), "/>");
  double ydecade = attr_num(strstr(ygrid, "<line class=\"grid\""), "y1") -
                   attr_num(strstr(y1, "<line class=\"grid\""), "y1");
  assert_true(fabs((attr_num(p_mm, "cy") - roof_y) / ydecade -
                   log10(100 / 1.048576)) < 0.01);
  /* tessera's own colour, onednn's fixed one, the next for another name;
   * the legend names each, escaped */
  assert_non_null(strstr(p_mm, "fill=\"#0969da\""));
  assert_non_null(strstr(sec, "fill=\"#cf222e\"><title>#1 mm: &lt;b&gt;v"));
  const char *legend = strstr(sec, "<g class=\"legend\">");
  assert_non_null(legend);
  assert_non_null(strstr(legend, ">tessera</text>"));
  assert_non_null(strstr(legend, ">onednn</text>"));
  assert_non_null(strstr(legend, ">&lt;b&gt;v&lt;/b&gt;</text>"));
  assert_int_equal(count(legend, "<g class=\"key\">"), 3);
  assert_null(strstr(sec, "Not probed"));
  free(sec);

  /* the target without figures: the note and the command, its one point */
  sec = roofline_section(html, other);
  assert_non_null(strstr(sec, "Not probed: no roofs."));
  assert_non_null(strstr(sec, "<code>tessera probe --db "));
  assert_null(strstr(sec, "<g class=\"roof"));
  assert_int_equal(attr_int(sec, "<g class=\"points\"", "data-count"), 1);
  free(sec);
  /* each section links to its target's roofline */
  char link[64];
  snprintf(link, sizeof link, "<a href=\"#roofline-%lld\">roofline</a>",
           (long long)other);
  assert_non_null(strstr(html, link));
  free(html);
}

/* The member `key` of o as a number (NAN when null or absent). */
static double num(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *str(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A vendor level stored by a confirmation carries the ratio of its rounds:
 * the page and the JSON show that one, labelled side by side, not the
 * quotient of the two stored figures. */
static void test_side_by_side(void **state) {
  fixture *fx = *state;
  int64_t mm, only_failed;
  fill_known(fx, &mm, &only_failed);
  assert_int_equal(ts_db_baseline_put_side(fx->db, mm, T_SKX, "<b>vendor</b>",
                                           2, 2.097152, 1.25, 7),
                   TS_OK);
  ts_bench_report_options o = quiet();
  char *html = report(fx->db, &o, NULL);
  const char *row = strstr(html, "<tr><td class=\"num\"><a href=\"#task-1\">");
  assert_non_null(row);
  char *line = strndup(row, strcspn(row, "\n"));
  assert_non_null(strstr(line, "(×1.25 side by side)</span>"));
  assert_null(strstr(line, "×0.50"));
  free(line);
  char *sec = task_section(html, 1);
  assert_non_null(strstr(sec, "tessera ×1.25 <strong>side by side</strong> "
                              "(median of 7 interleaved rounds"));
  free(sec);
  free(html);
  o.json = true;
  char *text = report(fx->db, &o, NULL);
  cJSON *j = cJSON_Parse(text);
  assert_non_null(j);
  const cJSON *r = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "rows"), 0);
  const cJSON *v = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "vendors"), 0);
  assert_true(num(v, "ratio") == 1.25 && num(v, "side_rounds") == 7);
  assert_true(cJSON_IsTrue(cJSON_GetObjectItem(v, "side_by_side")));
  cJSON_Delete(j);
  free(text);
}

static void test_json(void **state) {
  fixture *fx = *state;
  int64_t mm, only_failed;
  fill_known(fx, &mm, &only_failed);
  ts_bench_report_options o = quiet();
  o.json = true;
  ts_bench_report_stats st;
  char *text = report(fx->db, &o, &st);
  assert_int_equal(st.tasks, 2);
  cJSON *j = cJSON_Parse(text);
  assert_non_null(j);
  assert_string_equal(str(j, "format"), "tessera-report");
  assert_true(num(j, "format_version") == 1);
  assert_null(cJSON_GetObjectItem(j, "made")); /* no timestamp */
  assert_true(num(j, "workloads") == 3 && num(j, "pairs") == 2 &&
              num(j, "records") == 8);
  const cJSON *rows = cJSON_GetObjectItem(j, "rows");
  assert_int_equal(cJSON_GetArraySize(rows), 3);
  /* the matmul: the numbers of the page's summary row, unrounded */
  const cJSON *r = cJSON_GetArrayItem(rows, 0);
  assert_string_equal(str(r, "workload"), EVIL); /* JSON-escaped, intact */
  assert_non_null(strstr(str(r, "target"), "skylake-avx512"));
  assert_string_equal(str(r, "dtype"), "float32");
  assert_true(num(r, "bytes") == 49152);
  assert_true(fabs(num(r, "intensity") - 524288.0 / 49152) < 1e-12);
  assert_true(num(r, "records") == 6 && num(r, "ok") == 3);
  const cJSON *failed = cJSON_GetObjectItem(r, "failed");
  assert_true(num(failed, "build_error") == 1 && num(failed, "timeout") == 1 &&
              num(failed, "wrong_result") == 1);
  assert_true(num(r, "best_seconds") == 5e-4);
  assert_true(cJSON_IsFalse(cJSON_GetObjectItem(r, "confirmed")));
  assert_true(fabs(num(r, "gflops") - 1.048576) < 1e-12);
  assert_true(fabs(num(r, "peak_percent") - 10) < 1e-9);
  assert_string_equal(str(r, "peak_source"), "fp32_gflops_all_cores");
  assert_true(fabs(num(r, "roofline_gflops") - 524288.0 / 49152 * 0.5) < 1e-9);
  assert_true(fabs(num(r, "roofline_percent") - 19.6608) < 1e-9);
  const cJSON *v = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "vendors"), 0);
  assert_string_equal(str(v, "vendor"), "<b>vendor</b>");
  assert_true(num(v, "threads") == 2 && fabs(num(v, "ratio") - 0.5) < 1e-12);
  assert_true(cJSON_IsFalse(cJSON_GetObjectItem(v, "side_by_side")));
  /* only failures: no best; never measured: no target */
  r = cJSON_GetArrayItem(rows, 1);
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(r, "best_seconds")));
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(r, "gflops")));
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(r, "roofline_percent")));
  assert_true(num(cJSON_GetObjectItem(r, "failed"), "build_error") == 2);
  r = cJSON_GetArrayItem(rows, 2);
  assert_string_equal(str(r, "workload"), "never_measured");
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(r, "target")));
  assert_true(num(r, "records") == 0);
  /* the target: its probe object and the roofs drawn from it */
  const cJSON *t = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "targets"), 0);
  assert_true(num(cJSON_GetObjectItem(t, "probe"), "note<") == 1);
  const cJSON *roofs = cJSON_GetObjectItem(t, "roofs");
  const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(roofs, "compute"), 0);
  assert_string_equal(str(c, "key"), "fp32_gflops_all_cores");
  assert_true(num(c, "gflops") == 10.48576);
  const cJSON *m = cJSON_GetArrayItem(cJSON_GetObjectItem(roofs, "memory"), 0);
  assert_string_equal(str(m, "key"), "mem_bandwidth_gbs");
  assert_true(num(m, "gbs") == 0.5);
  assert_null(strstr(text, "<svg"));
  cJSON_Delete(j);
  free(text);
  /* the workload filter applies the same way */
  o.workload = "sm";
  text = report(fx->db, &o, NULL);
  j = cJSON_Parse(text);
  assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "rows")), 1);
  cJSON_Delete(j);
  free(text);
}

/* ---- rendering in headless Chromium ---- */

static bool find_program(const char *name, char *out, size_t cap) {
  const char *path = getenv("PATH");
  if (!path) path = "/usr/bin:/bin";
  for (const char *p = path; *p;) {
    size_t n = strcspn(p, ":");
    snprintf(out, cap, "%.*s/%s", (int)n, p, name);
    if (n && access(out, X_OK) == 0) return true;
    p += n + (p[n] == ':');
  }
  return false;
}

static long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Renders html_path with chromium into png_path (a screenshot) and dom_path
 * (the DOM after parsing). */
static void render(const char *chromium, const char *dir, const char *html,
                   const char *png, const char *dom) {
  char cmd[2048];
  const char *common =
      "--headless --no-sandbox --disable-gpu --hide-scrollbars "
      "--no-first-run --disable-dev-shm-usage";
  snprintf(cmd, sizeof cmd,
           "timeout 120 '%s' %s --user-data-dir='%s/profile' "
           "--window-size=1280,2000 --screenshot='%s' 'file://%s' "
           ">/dev/null 2>&1",
           chromium, common, dir, png, html);
  if (system(cmd) != 0) fail_msg("chromium failed: %s", cmd);
  snprintf(cmd, sizeof cmd,
           "timeout 120 '%s' %s --user-data-dir='%s/profile' --dump-dom "
           "'file://%s' >'%s' 2>/dev/null",
           chromium, common, dir, html, dom);
  if (system(cmd) != 0) fail_msg("chromium failed: %s", cmd);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *buf = malloc((size_t)n + 1);
  assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
  buf[n] = 0;
  fclose(f);
  return buf;
}

/* Width and height from a PNG's IHDR; false when it is not a PNG. */
static bool png_size(const char *path, uint32_t *w, uint32_t *h) {
  unsigned char b[24];
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  bool ok = fread(b, 1, 24, f) == 24;
  fclose(f);
  if (!ok || memcmp(b, "\x89PNG\r\n\x1a\n", 8) || memcmp(b + 12, "IHDR", 4))
    return false;
  *w = (uint32_t)b[16] << 24 | (uint32_t)b[17] << 16 | (uint32_t)b[18] << 8 |
       b[19];
  *h = (uint32_t)b[20] << 24 | (uint32_t)b[21] << 16 | (uint32_t)b[22] << 8 |
       b[23];
  return true;
}

static void test_chromium(void **state) {
  fixture *fx = *state;
  char chromium[512];
  if (!find_program("chromium", chromium, sizeof chromium) &&
      !find_program("chromium-browser", chromium, sizeof chromium)) {
    print_message("chromium is not installed (Debian package `chromium`): "
                  "skipping the rendering test\n");
    skip();
  }
  char empty_html[400], empty_png[400], empty_dom[400];
  char html_path[400], png[400], dom[400];
  snprintf(empty_html, sizeof empty_html, "%s/empty.html", fx->dir);
  snprintf(empty_png, sizeof empty_png, "%s/empty.png", fx->dir);
  snprintf(empty_dom, sizeof empty_dom, "%s/empty.dom", fx->dir);
  snprintf(html_path, sizeof html_path, "%s/report.html", fx->dir);
  snprintf(png, sizeof png, "%s/report.png", fx->dir);
  snprintf(dom, sizeof dom, "%s/report.dom", fx->dir);

  ts_bench_report_options o = quiet();
  char *html = report(fx->db, &o, NULL);
  write_file(empty_html, html);
  free(html);
  int64_t mm, only_failed;
  fill_known(fx, &mm, &only_failed);
  /* a longer curve than the known values give */
  for (int i = 0; i < 60; i++)
    add(fx->db, mm, 0, TS_DB_STATUS_OK, 1e-3 / (1 + (i * 7 % 13) * 0.1), NULL,
        "");
  html = report(fx->db, &o, NULL);
  write_file(html_path, html);
  free(html);

  render(chromium, fx->dir, empty_html, empty_png, empty_dom);
  render(chromium, fx->dir, html_path, png, dom);
  uint32_t w = 0, h = 0;
  assert_true(png_size(png, &w, &h));
  assert_int_equal(w, 1280);
  assert_int_equal(h, 2000);
  long size = file_size(png), empty = file_size(empty_png);
  print_message("screenshots: report %ld bytes, empty report %ld bytes\n", size,
                empty);
  assert_true(empty > 0);
  /* charts and tables draw far more than an almost blank page */
  assert_true(size > 40000 && size > 3 * empty);

  /* Chromium parsed the charts as SVG with their data in place */
  char *parsed = read_file(dom);
  assert_int_equal(count(parsed, "<svg class=\"chart curve\""), 2);
  assert_int_equal(count(parsed, "<svg class=\"chart histogram\""), 2);
  assert_int_equal(count(parsed, "<polyline class=\"best\""), 1);
  assert_int_equal(count(parsed, "r=\"2\""), 63); /* the curve's dots */
  assert_int_equal(count(parsed, "<svg class=\"chart roofline\""), 1);
  assert_int_equal(count(parsed, "<circle class=\"pt\""), 2);
  assert_true(count(parsed, "<rect ") >= 2);
  assert_null(strstr(parsed, "<script"));
  free(parsed);
}

/* Out of memory while the report is drawn (the page and the JSON): each
 * failing allocation gives TS_ENOMEM and no page, never a crash or a page
 * with a part missing. */
typedef struct oom_ctx {
  ts_db *db;
} oom_ctx;

static int oom_report(void *ctx, int last, char **out, ts_error *err) {
  oom_ctx *c = ctx;
  *out = NULL;
  ts_bench_report_options o = quiet();
  o.json = last == 1;
  char *buf = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&buf, &size);
  if (!f) return TS_ERR(err, TS_EIO, "open_memstream");
  int rc = ts_bench_report_write(c->db, &o, f, NULL, err);
  fclose(f);
  if (rc) {
    free(buf);
    return rc;
  }
  *out = buf;
  return TS_OK;
}

static void test_out_of_memory(void **state) {
  fixture *fx = *state;
  int64_t mm, only_failed;
  fill_known(fx, &mm, &only_failed);
  static const char *const stages[] = {"report_html", "report_json"};
  oom_ctx ctx = {fx->db};
  for (int s = 0; s < 2; s++) { /* the page, then the JSON */
    oom_walk w = {.name = stages[s],
                  .stages = stages,
                  .n_stages = s + 1,
                  .run = oom_report,
                  .stride = 1};
    oom_walk_run(&w, &ctx);
  }
}

/* Levels far off the curve's scale (a denormal curve, levels near the
 * largest double, negative ones): the chart is still written, each label
 * inside the frame, and quickly (their placement once never ended). */
static void test_curve_extremes(void **state) {
  (void)state;
  const double values[][4] = {{1e-310, 2e-310, NAN, 3e-310}, {1, 2, NAN, 3}};
  report_level levels[][6] = {{{"a", 1e300},
                               {"b", 5e299},
                               {"c", 1e300},
                               {"d", -1e300},
                               {"e", NAN},
                               {"f", 1}},
                              {{"a", -1e18},
                               {"b", -1e18},
                               {"c", -1e18},
                               {"d", 2},
                               {"e", NAN},
                               {"f", 1}}};
  alarm(20); /* a hang fails the test */
  for (int c = 0; c < 8; c++) {
    strbuf b = {0};
    report_svg_curve(&b, values[c / 4], 4, c % 2, "GFLOP/s", levels[c / 2 % 2],
                     6, 100);
    assert_non_null(b.data);
    assert_non_null(strstr(b.data, "</svg>"));
    int n = 0;
    for (const char *q = b.data; (q = strstr(q, "class=\"level\"")); q++) n++;
    assert_int_equal(n, 5);
    sb_free(&b);
  }
  alarm(0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_peaks),
      cmocka_unit_test(test_curve_extremes),
      cmocka_unit_test_setup_teardown(test_empty, setup, teardown),
      cmocka_unit_test_setup_teardown(test_known_values, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unparsable_trace_and_filter, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_many_records, setup, teardown),
      cmocka_unit_test_setup_teardown(test_roofline, setup, teardown),
      cmocka_unit_test_setup_teardown(test_json, setup, teardown),
      cmocka_unit_test_setup_teardown(test_side_by_side, setup, teardown),
      cmocka_unit_test_setup_teardown(test_chromium, setup, teardown),
      cmocka_unit_test_setup_teardown(test_out_of_memory, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
