/*
 * report.c — the tuning report: one self-contained HTML page made from a
 * tuning database. It reads the overview (every workload × target), and for
 * each pair the records reduced to chart points, the best record, the
 * vendor levels and the target's probed peaks; it writes a summary table,
 * a table of the probed targets, and a section per pair with the tuning
 * curve, the latency histogram (report_svg.c), the best trace as a readable
 * script and the workload's TIR. One pass over the pairs: each section is
 * rendered while its summary row is, so only one pair's records are in
 * memory at a time. Also the machine-peak rules shared with `tessera show`.
 */
#include "internal.h"

#include "codegen/codegen.h"
#include "schedule/schedule.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- peaks ---- */

/* A positive number under `key` in the probe object, else NAN. */
static double probe_number(const cJSON *probe, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(probe, key);
  return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble > 0
             ? v->valuedouble
             : NAN;
}

/* The first figure of `all` (all cores), else the first of `per_core`
 * times the core count; times `scale` (1000 for TOP/s) into p. */
static void core_peak(const cJSON *probe, const char *const *all,
                      const char *const *per_core, double scale, int cores,
                      ts_bench_peak *p) {
  for (int i = 0; all[i]; i++) {
    double v = probe_number(probe, all[i]);
    if (isfinite(v)) {
      p->gflops = v * scale;
      snprintf(p->source, sizeof p->source, "%s", all[i]);
      return;
    }
  }
  for (int i = 0; per_core[i] && cores > 0; i++) {
    double v = probe_number(probe, per_core[i]);
    if (isfinite(v)) {
      p->gflops = v * scale * cores;
      snprintf(p->source, sizeof p->source, "%s x %d", per_core[i], cores);
      return;
    }
  }
}

ts_bench_peak ts_bench_peak_of(const char *probe_json, ts_dtype dtype,
                               int num_cores) {
  static const char *const fp32_all[] = {"fp32_gflops_all_cores", NULL};
  static const char *const fp32_one[] = {"fp32_gflops_per_core", NULL};
  static const char *const fp64_all[] = {"fp64_gflops_all_cores", NULL};
  static const char *const fp64_one[] = {"fp64_gflops_per_core", NULL};
  static const char *const bf16_all[] = {"amx_bf16_tops",
                                         "amx_bf16_tflops_all_cores", NULL};
  static const char *const bf16_one[] = {"amx_bf16_tflops_per_core", NULL};
  static const char *const int8_all[] = {"amx_int8_tops",
                                         "amx_int8_tops_all_cores", NULL};
  static const char *const int8_one[] = {"amx_int8_tops_per_core", NULL};
  ts_bench_peak p = {NAN, NAN, ""};
  cJSON *probe = probe_json ? cJSON_Parse(probe_json) : NULL;
  if (!cJSON_IsObject(probe)) {
    cJSON_Delete(probe);
    return p;
  }
  bool int8 =
      (dtype.code == TS_DT_INT || dtype.code == TS_DT_UINT) && dtype.bits == 8;
  if (dtype.code == TS_DT_FLOAT && dtype.bits == 32)
    core_peak(probe, fp32_all, fp32_one, 1, num_cores, &p);
  else if (dtype.code == TS_DT_FLOAT && dtype.bits == 64)
    core_peak(probe, fp64_all, fp64_one, 1, num_cores, &p);
  else if (dtype.code == TS_DT_BFLOAT)
    core_peak(probe, bf16_all, bf16_one, 1000, num_cores, &p);
  else if (int8)
    core_peak(probe, int8_all, int8_one, 1000, num_cores, &p);
  p.bandwidth_gbs = probe_number(probe, "mem_bandwidth_gbs");
  cJSON_Delete(probe);
  return p;
}

double ts_bench_roofline_gflops(const ts_bench_peak *p, double flops,
                                double bytes) {
  if (!(p->gflops > 0) || !(p->bandwidth_gbs > 0) || !(flops > 0) ||
      !(bytes > 0))
    return NAN;
  double memory = flops / bytes * p->bandwidth_gbs;
  return memory < p->gflops ? memory : p->gflops;
}

ts_bench_report_options ts_bench_report_defaults(void) {
  return (ts_bench_report_options){
      .curve_points = 1000,
      .histogram_bins = 40,
      .timestamp = true,
  };
}

/* ---- formatting ---- */

static void format_gflops(double g, char out[32]) {
  if (!isfinite(g))
    snprintf(out, 32, "—");
  else if (g >= 100)
    snprintf(out, 32, "%.0f", g);
  else
    snprintf(out, 32, "%.3g", g);
}

static void format_flops(double f, char out[32]) {
  static const char *const units[] = {"", "k", "M", "G", "T", "P"};
  int u = 0;
  while (f >= 1000 && u < 5) f /= 1000, u++;
  snprintf(out, 32, "%.4g %sFLOP", f, units[u]);
}

static void format_percent(double num, double den, char out[32]) {
  if (isfinite(num) && isfinite(den) && den > 0)
    snprintf(out, 32, "%.1f%%", 100 * num / den);
  else
    snprintf(out, 32, "—");
}

/* The target string without its feature list and CUDA limits. */
static void short_target(const char *t, char *out, size_t cap) {
  size_t used = 0;
  out[0] = 0;
  for (const char *p = t; *p;) {
    while (*p == ' ') p++;
    size_t n = strcspn(p, " ");
    if (n && strncmp(p, "-mattr=", 7) && strncmp(p, "-max-", 5)) {
      int w = snprintf(out + used, cap - used, "%s%.*s", used ? " " : "",
                       (int)n, p);
      if (w < 0 || (size_t)w >= cap - used) {
        out[cap - 1] = 0;
        return;
      }
      used += (size_t)w;
    }
    p += n;
  }
}

/* ---- the report ---- */

typedef struct job_name {
  int64_t id;
  char *name;
} job_name;

typedef struct report {
  ts_db *db;
  const ts_bench_report_options *o;
  ts_error *err;
  report_buf summary;  /* rows of the summary table */
  report_buf sections; /* one section per workload × target */
  ts_db_job *jobs;
  int n_jobs;
  bool any_peak, any_roofline, any_vendor;
  ts_bench_report_stats stats;
  /* the current workload (rows come ordered by workload) */
  int64_t workload_id;
  ts_db_workload w;
  ts_dtype dtype;
  double bytes;   /* parameter bytes: the least a run moves */
  char note[300]; /* why dtype/bytes are unknown, or "" */
} report;

/* One workload × target while it is rendered. */
typedef struct task {
  const ts_db_summary *row;
  int index; /* section number, from 1 */
  ts_db_record_point *pts;
  int64_t n_pts;
  int64_t by_status[TS_DB_N_STATUS];
  ts_db_record best;
  bool has_best;
  ts_db_baseline *vendors;
  int n_vendors;
  ts_bench_peak peak;
  double roofline;
  double best_gflops;
} task;

static int db_fail(report *r) {
  const ts_error *e = ts_db_error(r->db);
  return TS_ERR(r->err, e->code ? e->code : TS_EIO, "%s", e->msg);
}

static const char *job_of(const report *r, int64_t id) {
  for (int i = 0; i < r->n_jobs; i++)
    if (r->jobs[i].id == id) return r->jobs[i].name;
  return NULL;
}

/* Loads the workload's row and, from its function, the input dtype and the
 * bytes of its parameters. A stored TIR that does not parse leaves a note
 * (the report goes on without peaks for it). */
static int load_workload(report *r, int64_t id) {
  if (r->workload_id == id) return TS_OK;
  ts_db_workload_clear(&r->w);
  r->workload_id = id;
  r->dtype = (ts_dtype){0, 0, 0};
  r->bytes = 0;
  r->note[0] = 0;
  if (ts_db_get_workload(r->db, id, &r->w)) return db_fail(r);
  ts_func *f = NULL;
  if (ts_db_workload_func(r->db, id, &f)) {
    snprintf(r->note, sizeof r->note, "%s", ts_db_errmsg(r->db));
    return TS_OK;
  }
  int n = ts_func_n_params(f);
  for (int i = 0; i < n; i++) {
    const ts_buffer *b = ts_func_param(f, i);
    if (i == 0) r->dtype = ts_buffer_dtype(b);
    r->bytes += (double)ts_buffer_bytes(b);
  }
  ts_func_free(f);
  return TS_OK;
}

static int load_task(report *r, task *t) {
  const ts_db_summary *row = t->row;
  if (ts_db_record_points(r->db, row->workload_id, row->target, &t->pts,
                          &t->n_pts))
    return db_fail(r);
  for (int64_t i = 0; i < t->n_pts; i++) t->by_status[t->pts[i].status]++;
  int rc = ts_db_best(r->db, row->workload_id, row->target, &t->best);
  if (rc == TS_OK)
    t->has_best = true;
  else if (rc != TS_ENOTFOUND)
    return db_fail(r);
  if (ts_db_baselines(r->db, row->workload_id, row->target, &t->vendors,
                      &t->n_vendors))
    return db_fail(r);
  char *probe = NULL;
  if (ts_db_get_target_probe(r->db, row->target_id, &probe)) return db_fail(r);
  int cores = 0;
  ts_target *target = NULL;
  ts_error terr;
  ts_error_clear(&terr);
  if (ts_target_parse(row->target, &target, &terr) == TS_OK) {
    cores = ts_target_num_cores(target);
    ts_target_free(target);
  }
  t->peak = ts_bench_peak_of(probe, r->dtype, cores);
  free(probe);
  t->best_gflops =
      t->has_best && ts_db_record_seconds(&t->best) > 0 && row->flops > 0
          ? row->flops / ts_db_record_seconds(&t->best) * 1e-9
          : NAN;
  t->roofline = ts_bench_roofline_gflops(&t->peak, row->flops, r->bytes);
  return TS_OK;
}

static void task_clear(task *t) {
  free(t->pts);
  ts_db_record_clear(&t->best);
  ts_db_baselines_free(t->vendors, t->n_vendors);
  memset(t, 0, sizeof *t);
}

/* "3 build_error, 1 timeout" or "—". */
static void failures_text(report_buf *b, const int64_t *by_status) {
  bool any = false;
  for (int s = 1; s < TS_DB_N_STATUS; s++) {
    if (!by_status[s]) continue;
    report_printf(b, "%s%lld %s", any ? ", " : "", (long long)by_status[s],
                  ts_db_status_name((ts_db_status)s));
    any = true;
  }
  if (!any) report_puts(b, "—");
}

/* The fastest vendor level of a task, or NULL. */
static const ts_db_baseline *best_vendor(const task *t) {
  const ts_db_baseline *v = NULL;
  for (int i = 0; i < t->n_vendors; i++)
    if (!v || t->vendors[i].gflops > v->gflops) v = &t->vendors[i];
  return v;
}

/* The summary row of a task; the peak and vendor cells are written in all
 * rows and hidden by a class on the table when no row has them. */
static void summary_row(report *r, const task *t) {
  const ts_db_summary *row = t->row;
  report_buf *b = &r->summary;
  char lat[32], gf[32], pk[32], rl[32], st[400];
  report_puts(b, "<tr><td class=\"num\">");
  if (t->index)
    report_printf(b, "<a href=\"#task-%d\">%d</a>", t->index, t->index);
  report_puts(b, "</td><td class=\"name\">");
  report_escape(b, row->name);
  report_puts(b, "</td><td class=\"target\" title=\"");
  report_escape(b, row->target ? row->target : "");
  report_puts(b, "\">");
  if (row->target) {
    short_target(row->target, st, sizeof st);
    report_escape(b, st);
  } else {
    report_puts(b, "<span class=\"none\">no records</span>");
  }
  report_format_seconds(t->has_best ? ts_db_record_seconds(&t->best) : NAN,
                        lat);
  format_gflops(t->best_gflops, gf);
  format_percent(t->best_gflops, t->peak.gflops, pk);
  format_percent(t->best_gflops, t->roofline, rl);
  report_printf(b,
                "</td><td class=\"num\">%s</td><td class=\"num\">%s</td>"
                "<td class=\"num peak\">%s</td><td class=\"num roofline\">%s"
                "</td><td class=\"vendor\">",
                lat, gf, pk, rl);
  const ts_db_baseline *v = best_vendor(t);
  if (v) {
    char vg[32];
    format_gflops(v->gflops, vg);
    report_escape(b, v->vendor);
    report_printf(b, " %s", vg);
    if (isfinite(t->best_gflops))
      report_printf(b, " <span class=\"ratio\">(×%.2f)</span>",
                    t->best_gflops / v->gflops);
  } else {
    report_puts(b, "—");
  }
  report_printf(b,
                "</td><td class=\"num\">%lld</td><td class=\"num\">%lld</td>"
                "<td class=\"failed\">",
                (long long)row->n_records, (long long)row->n_ok);
  failures_text(b, t->by_status);
  report_puts(b, "</td></tr>\n");
}

/* The best record's trace as a readable script; the JSON when it does not
 * parse (with the reason). */
static void trace_block(report *r, const task *t) {
  report_buf *b = &r->sections;
  const ts_db_record *rec = &t->best;
  report_printf(b,
                "<details class=\"trace\" open><summary>best schedule: "
                "record %lld",
                (long long)rec->id);
  if (rec->job_id) {
    const char *job = job_of(r, rec->job_id);
    report_puts(b, ", job ");
    report_escape(b, job ? job : "?");
    report_printf(b, " trial %lld", (long long)rec->trial);
  }
  if (rec->worker && rec->worker[0]) {
    report_puts(b, ", worker ");
    report_escape(b, rec->worker);
  }
  report_puts(b, ", ");
  report_escape(b, rec->created);
  report_puts(b, "</summary>\n");
  ts_trace *trace = NULL;
  ts_error terr;
  ts_error_clear(&terr);
  const char *json = rec->trace_json ? rec->trace_json : "";
  if (ts_trace_from_json(json, strlen(json), &trace, &terr) == TS_OK) {
    char *script = ts_trace_print(trace);
    report_puts(b, "<pre>");
    report_escape(b, script);
    report_puts(b, "</pre>\n");
    free(script);
    ts_trace_free(trace);
  } else {
    report_puts(b, "<p class=\"warn\">the trace does not parse: ");
    report_escape(b, terr.msg);
    report_puts(b, "</p>\n<pre>");
    report_escape(b, json);
    report_puts(b, "</pre>\n");
  }
  report_puts(b, "</details>\n");
}

static void section(report *r, const task *t) {
  const ts_db_summary *row = t->row;
  report_buf *b = &r->sections;
  char st[400], s1[32], s2[32], s3[32];
  short_target(row->target, st, sizeof st);
  report_printf(b,
                "<section class=\"task\" id=\"task-%d\">\n<h3><a "
                "href=\"#task-%d\">#%d</a> ",
                t->index, t->index, t->index);
  report_escape(b, row->name);
  report_puts(b,
              " <span class=\"on\">on</span> <span class=\"target\" title=\"");
  report_escape(b, row->target);
  report_puts(b, "\">");
  report_escape(b, st);
  report_puts(b, "</span></h3>\n<ul class=\"facts\">\n");
  ts_target *tt = NULL;
  if (row->target && ts_target_parse(row->target, &tt, NULL) == TS_OK) {
    char isa[160];
    report_puts(b, "<li>ISA ");
    report_escape(b, ts_target_isa(tt, isa, sizeof isa));
    report_puts(b, "</li>\n");
    ts_target_free(tt);
  }
  report_puts(b, "<li>workload <code>");
  report_escape(b, row->hash);
  format_flops(row->flops, s1);
  report_printf(b, "</code> · %s", s1);
  if (r->dtype.bits) {
    char dt[32];
    report_printf(b, " · %s", ts_dtype_str(r->dtype, dt));
  }
  report_puts(b, "</li>\n");
  if (r->note[0]) {
    report_puts(b, "<li class=\"warn\">");
    report_escape(b, r->note);
    report_puts(b, "</li>\n");
  }
  report_printf(b,
                "<li>%lld measurements: %lld ok, failed: ", (long long)t->n_pts,
                (long long)t->by_status[TS_DB_STATUS_OK]);
  failures_text(b, t->by_status);
  report_puts(b, "</li>\n<li>best: ");
  if (t->has_best) {
    report_format_seconds(ts_db_record_seconds(&t->best), s1);
    format_gflops(t->best_gflops, s2);
    report_printf(b, "%s · %s GFLOP/s", s1, s2);
    if (isfinite(t->peak.gflops)) {
      format_percent(t->best_gflops, t->peak.gflops, s1);
      format_gflops(t->peak.gflops, s3);
      report_printf(b, " · %s of peak (%s GFLOP/s, ", s1, s3);
      report_escape(b, t->peak.source);
      report_puts(b, ")");
      if (t->best_gflops > t->peak.gflops)
        report_puts(b, " <span class=\"warn\">above the probed peak: the "
                       "probe ran slow; run <code>tessera probe</code> again "
                       "on an idle machine</span>");
    }
    if (isfinite(t->roofline)) {
      format_percent(t->best_gflops, t->roofline, s1);
      format_gflops(t->roofline, s3);
      report_printf(b, " · %s of the roofline bound (%s GFLOP/s)", s1, s3);
    }
    /* which figure the headline is: a confirmed median or the luckiest
     * search-time measurement */
    if (t->best.confirmed_rounds > 0)
      report_printf(b,
                    " <span class=\"how\">(confirmed: median of %d "
                    "interleaved rounds of the top schedules, spread "
                    "%.0f%%)</span>",
                    t->best.confirmed_rounds, t->best.confirmed_spread * 100);
    else
      report_puts(b, " <span class=\"how\">(search-time figure, not "
                     "confirmed: <code>tessera db confirm</code> measures "
                     "the top schedules again side by side)</span>");
  } else {
    report_puts(b, "no successful measurement");
  }
  report_puts(b, "</li>\n");
  for (int i = 0; i < t->n_vendors; i++) {
    const ts_db_baseline *v = &t->vendors[i];
    format_gflops(v->gflops, s1);
    report_puts(b, "<li>vendor ");
    report_escape(b, v->vendor);
    report_printf(b, " (%d thread%s): %s GFLOP/s", v->threads,
                  v->threads == 1 ? "" : "s", s1);
    if (isfinite(t->best_gflops))
      report_printf(b, " · tessera ×%.2f (%s best against this figure)",
                    t->best_gflops / v->gflops,
                    t->best.confirmed_rounds > 0 ? "the confirmed"
                                                 : "the search-time");
    report_puts(b, ", measured ");
    report_escape(b, v->created);
    report_puts(b, "</li>\n");
  }
  report_puts(b, "</ul>\n<div class=\"charts\">\n");

  /* the curve: GFLOP/s per measurement, or latency when FLOPs are 0 */
  bool by_flops = row->flops > 0;
  double *values = malloc(sizeof *values * (size_t)(t->n_pts ? t->n_pts : 1));
  double *secs = malloc(sizeof *secs * (size_t)(t->n_pts ? t->n_pts : 1));
  if (!values || !secs) abort();
  int64_t n_secs = 0;
  for (int64_t i = 0; i < t->n_pts; i++) {
    double m = t->pts[i].median_s;
    bool ok = t->pts[i].status == TS_DB_STATUS_OK && isfinite(m) && m > 0;
    values[i] = !ok ? NAN : by_flops ? row->flops / m * 1e-9 : m * 1e6;
    if (ok) secs[n_secs++] = m;
  }
  /* vendor levels: GFLOP/s on the curve, the same as latencies on the
   * histogram (both need the workload's FLOPs) */
  int n_levels = by_flops ? t->n_vendors : 0;
  report_level *levels = calloc((size_t)n_levels + 1, sizeof *levels);
  report_level *marks = calloc((size_t)n_levels + 1, sizeof *marks);
  if (!levels || !marks) abort();
  for (int i = 0; i < n_levels; i++) {
    const ts_db_baseline *v = &t->vendors[i];
    format_gflops(v->gflops, s1);
    snprintf(levels[i].label, sizeof levels[i].label, "%s %dt %s", v->vendor,
             v->threads, s1);
    levels[i].value = v->gflops;
    marks[i].value = row->flops / (v->gflops * 1e9);
    report_format_seconds(marks[i].value, s1);
    snprintf(marks[i].label, sizeof marks[i].label, "%s %dt %s", v->vendor,
             v->threads, s1);
  }
  report_svg_curve(b, values, t->n_pts, by_flops,
                   by_flops ? "GFLOP/s" : "latency (µs)", levels, n_levels,
                   r->o->curve_points);
  report_svg_histogram(b, secs, n_secs, r->o->histogram_bins, marks, n_levels);
  free(marks);
  free(values);
  free(secs);
  free(levels);
  bool failed = t->n_pts > t->by_status[TS_DB_STATUS_OK];
  report_printf(
      b,
      "</div>\n<p class=\"legend\"><span class=\"k-best\">━</span> "
      "best %s so far <span class=\"k-trial\">●</span> each "
      "measurement%s%s</p>\n",
      by_flops ? "GFLOP/s" : "latency",
      failed ? " <span class=\"k-fail\">┃</span> failed measurements" : "",
      n_levels ? " <span class=\"k-level\">╌</span> vendor library" : "");
  if (t->has_best) trace_block(r, t);
  report_puts(b, "<details class=\"tir\"><summary>workload TIR</summary><pre>");
  report_escape(b, r->w.tir);
  report_puts(b, "</pre></details>\n</section>\n");
}

/* The probed figures of every target in the report (numbers only). */
static int targets_table(report *r, const ts_db_summary *rows, int n,
                         report_buf *b) {
  bool header = false;
  for (int i = 0; i < n; i++) {
    if (!rows[i].target_id) continue;
    bool seen = false;
    for (int j = 0; j < i && !seen; j++)
      seen = rows[j].target_id == rows[i].target_id;
    if (seen) continue;
    char *probe = NULL;
    if (ts_db_get_target_probe(r->db, rows[i].target_id, &probe))
      return db_fail(r);
    if (!header) {
      report_puts(b, "<h2>Targets</h2>\n<table class=\"targets\"><thead><tr>"
                     "<th>target</th><th>probed figures</th></tr></thead>"
                     "<tbody>\n");
      header = true;
    }
    char st[400];
    short_target(rows[i].target, st, sizeof st);
    report_puts(b, "<tr><td>");
    report_escape(b, st);
    ts_target *tt = NULL;
    if (rows[i].target && ts_target_parse(rows[i].target, &tt, NULL) == TS_OK) {
      char isa[160];
      report_puts(b, "<br>ISA: ");
      report_escape(b, ts_target_isa(tt, isa, sizeof isa));
      ts_target_free(tt);
    }
    report_puts(b, "<br><code class=\"full\">");
    report_escape(b, rows[i].target);
    report_puts(b, "</code></td><td>");
    cJSON *p = probe ? cJSON_Parse(probe) : NULL;
    const cJSON *figures = cJSON_IsObject(p) ? p : NULL;
    bool any = false;
    const cJSON *item;
    cJSON_ArrayForEach(item, figures) {
      if (!cJSON_IsNumber(item) || !item->string) continue;
      report_puts(b, any ? " · " : "");
      report_escape(b, item->string);
      report_printf(b, " = %.4g", item->valuedouble);
      any = true;
    }
    if (!any)
      report_puts(b, probe ? "(no numeric figures)"
                           : "not probed (<code>tessera probe</code>)");
    cJSON_Delete(p);
    free(probe);
    report_puts(b, "</td></tr>\n");
  }
  if (header) report_puts(b, "</tbody></table>\n");
  return TS_OK;
}

static const char style[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;"
    "margin:24px auto;max-width:1500px;padding:0 16px;color:#1f2328;"
    "background:#fff;font-size:14px}\n"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px}"
    "h3{font-size:16px;margin:0 0 6px}\n"
    ".meta{color:#59636e;margin:0 0 16px}\n"
    "table{border-collapse:collapse}th,td{padding:4px 8px;border-bottom:1px "
    "solid #d1d9e0;text-align:left;vertical-align:top}th{background:#f6f8fa}"
    "\ntd.num{text-align:right;font-variant-numeric:tabular-nums}"
    "td.target{max-width:280px}table.targets td{width:50%}"
    "code.full{font-size:11px;color:#59636e;overflow-wrap:anywhere}td.failed{"
    "color:#b35900}.none{color:#59636e}"
    "\ntable.no-peak .peak,table.no-roofline .roofline,table.no-vendor "
    ".vendor{display:none}\n"
    "section.task{border-top:2px solid #d1d9e0;margin-top:24px;"
    "padding-top:12px}\n"
    ".on{color:#59636e;font-weight:normal}.target{font-weight:normal}\n"
    "ul.facts{margin:4px 0 8px;padding-left:18px}.warn{color:#b3261e}\n"
    ".charts{display:flex;flex-wrap:wrap;gap:8px}\n"
    "svg.chart{max-width:100%;height:auto;font-size:11px;fill:#1f2328}\n"
    "svg .grid{stroke:#eaeef2}svg .frame,svg .tick{stroke:#59636e}"
    "svg .label{fill:#59636e}\n"
    "svg .trials circle{fill:#8c959f;fill-opacity:.55}"
    "svg .trial-range{stroke:#8c959f;stroke-width:2;fill:none}\n"
    "svg polyline.best{fill:none;stroke:#0969da;stroke-width:2}"
    "svg path.fail{stroke:#cf222e;stroke-width:1.5}\n"
    "svg .level line{stroke:#bc4c00;stroke-dasharray:6 4;stroke-width:1.5}"
    "svg .level text{fill:#bc4c00}\n"
    "svg .bars rect{fill:#54aeff}svg .mark line{stroke-width:1.5}"
    "svg .mark.best line{stroke:#0969da}svg .mark.best text{fill:#0969da}"
    "svg .mark.level line{stroke:#bc4c00;stroke-dasharray:6 4}"
    "svg .mark.level text{fill:#bc4c00}svg .empty{fill:#59636e;"
    "font-size:14px}\n"
    ".legend{color:#59636e;margin:2px 0 8px}.k-best{color:#0969da}"
    ".k-trial{color:#8c959f}.k-fail{color:#cf222e}.k-level{color:#bc4c00}\n"
    "pre{background:#f6f8fa;padding:8px;overflow-x:auto;font-size:12px;"
    "font-family:ui-monospace,'SFMono-Regular',Menlo,Consolas,monospace}\n"
    "summary{cursor:pointer;margin:4px 0}\n";

static int write_page(report *r, const ts_db_summary *rows, int n,
                      const report_buf *targets, FILE *out) {
  report_buf head = {0};
  const char *title =
      r->o->title && r->o->title[0] ? r->o->title : "tessera tuning report";
  report_puts(&head, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n"
                     "<meta charset=\"utf-8\">\n<meta name=\"viewport\" "
                     "content=\"width=device-width, initial-scale=1\">\n"
                     "<title>");
  report_escape(&head, title);
  report_printf(&head, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<h1>",
                style);
  report_escape(&head, title);
  report_puts(&head, "</h1>\n<p class=\"meta\">database <code>");
  report_escape(&head, ts_db_path(r->db));
  report_printf(&head,
                "</code> · %d workload%s · %d workload × target pair%s · "
                "%lld measurements",
                r->stats.workloads, r->stats.workloads == 1 ? "" : "s",
                r->stats.tasks, r->stats.tasks == 1 ? "" : "s",
                (long long)r->stats.records);
  if (r->o->timestamp) {
    char when[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    report_printf(&head, " · made %s by tessera %s", when, TS_VERSION);
  }
  report_puts(&head, "</p>\n<h2>Summary</h2>\n");
  if (!n) {
    report_puts(&head, "<p class=\"empty\">The database holds no workloads "
                       "yet: run <code>tessera tune</code> to fill it.</p>\n");
  } else {
    report_printf(&head,
                  "<table class=\"summary%s%s%s\"><thead><tr><th>#</th>"
                  "<th>workload</th><th>target</th><th>best latency</th>"
                  "<th>GFLOP/s</th><th class=\"peak\">%% of peak</th>"
                  "<th class=\"roofline\">%% of roofline</th>"
                  "<th class=\"vendor\">best vendor GFLOP/s (tessera ×)</th>"
                  "<th>records</th><th>ok</th><th>failed</th></tr></thead>"
                  "<tbody>\n",
                  r->any_peak ? "" : " no-peak",
                  r->any_roofline ? "" : " no-roofline",
                  r->any_vendor ? "" : " no-vendor");
  }
  bool ok = fwrite(head.data, 1, head.len, out) == head.len;
  r->stats.bytes += (int64_t)head.len;
  report_buf_free(&head);
  const char *tail_table = "</tbody></table>\n";
  const char *end = "</body>\n</html>\n";
  if (n) {
    ok =
        ok && fwrite(r->summary.data, 1, r->summary.len, out) == r->summary.len;
    ok = ok && fputs(tail_table, out) >= 0;
    r->stats.bytes += (int64_t)(r->summary.len + strlen(tail_table));
  }
  if (targets->len) {
    ok = ok && fwrite(targets->data, 1, targets->len, out) == targets->len;
    r->stats.bytes += (int64_t)targets->len;
  }
  if (r->sections.len) {
    const char *h = "<h2>Workloads × targets</h2>\n";
    ok = ok && fputs(h, out) >= 0 &&
         fwrite(r->sections.data, 1, r->sections.len, out) == r->sections.len;
    r->stats.bytes += (int64_t)(strlen(h) + r->sections.len);
  }
  ok = ok && fputs(end, out) >= 0 && fflush(out) == 0;
  r->stats.bytes += (int64_t)strlen(end);
  if (!ok)
    return TS_ERR(r->err, TS_EIO, "writing the report: %s", strerror(errno));
  return TS_OK;
}

int ts_bench_report_write(ts_db *db, const ts_bench_report_options *opts,
                          FILE *out, ts_bench_report_stats *stats,
                          ts_error *err) {
  ts_bench_report_options o = opts ? *opts : ts_bench_report_defaults();
  if (o.curve_points < 10) o.curve_points = 10;
  if (o.histogram_bins < 1) o.histogram_bins = 1;
  if (stats) memset(stats, 0, sizeof *stats);
  report r = {.db = db, .o = &o, .err = err};
  int64_t only = 0;
  int rc = TS_OK;
  if (o.workload && ts_db_resolve_workload(db, o.workload, &only))
    return db_fail(&r);
  ts_db_summary *rows = NULL;
  int n = 0;
  if (ts_db_list(db, only, &rows, &n)) return db_fail(&r);
  if (ts_db_jobs(db, &r.jobs, &r.n_jobs)) {
    ts_db_summaries_free(rows, n);
    return db_fail(&r);
  }
  report_buf targets = {0};
  for (int i = 0; i < n && rc == TS_OK; i++) {
    task t = {.row = &rows[i],
              .peak = {NAN, NAN, ""},
              .roofline = NAN,
              .best_gflops = NAN};
    if (i == 0 || rows[i].workload_id != rows[i - 1].workload_id)
      r.stats.workloads++;
    if ((rc = load_workload(&r, rows[i].workload_id))) break;
    if (rows[i].target) {
      t.index = ++r.stats.tasks;
      if ((rc = load_task(&r, &t))) {
        task_clear(&t);
        break;
      }
      r.stats.records += t.n_pts;
      r.any_peak = r.any_peak || isfinite(t.peak.gflops);
      r.any_roofline = r.any_roofline || isfinite(t.roofline);
      r.any_vendor = r.any_vendor || t.n_vendors;
      section(&r, &t);
    }
    summary_row(&r, &t);
    task_clear(&t);
  }
  if (rc == TS_OK) rc = targets_table(&r, rows, n, &targets);
  if (rc == TS_OK) rc = write_page(&r, rows, n, &targets, out);
  if (rc == TS_OK && stats) *stats = r.stats;
  report_buf_free(&targets);
  report_buf_free(&r.summary);
  report_buf_free(&r.sections);
  ts_db_workload_clear(&r.w);
  ts_db_jobs_free(r.jobs, r.n_jobs);
  ts_db_summaries_free(rows, n);
  return rc;
}
