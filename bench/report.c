/*
 * report.c — the tuning report: one self-contained HTML page made from a
 * tuning database. It reads the overview (every workload × target), and for
 * each pair the records reduced to chart points, the best record, the
 * vendor levels and the target's probed peaks; it writes a summary table,
 * a table of the probed targets, a roofline chart per target (its probed
 * roofs, each workload's best and vendor levels at the workload's
 * arithmetic intensity), and a section per pair with the tuning curve, the
 * latency histogram (report_svg.c), the best trace as a readable script,
 * the best schedule's lowered loops and the workload's TIR. One pass over
 * the pairs: each section is rendered while its summary row is, so only
 * one pair's records are in memory at a time. The same pass can write the
 * numbers as one JSON object instead (ts_bench_report_options.json). Also
 * the machine-peak rules shared with `tessera show`.
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

/* FLOPs per byte moved, the x of the roofline (ts_bench_roofline_gflops
 * multiplies the bandwidth by the same ratio); NAN when either is
 * unknown. */
static double intensity_of(double flops, double bytes) {
  return flops > 0 && bytes > 0 ? flops / bytes : NAN;
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

/* The cores of a target string (0 when it does not parse). */
static int cores_of(const char *target) {
  ts_target *t = NULL;
  int cores = 0;
  if (target && ts_target_parse(target, &t, NULL) == TS_OK) {
    cores = ts_target_num_cores(t);
    ts_target_free(t);
  }
  return cores;
}

/* Whether rows[i] is the first row of its target (targets listed once). */
static bool first_of_target(const ts_db_summary *rows, int i) {
  if (!rows[i].target_id) return false;
  for (int j = 0; j < i; j++)
    if (rows[j].target_id == rows[i].target_id) return false;
  return true;
}

typedef struct job_name {
  int64_t id;
  char *name;
} job_name;

/* A point of a target's roofline, kept until the charts are drawn. */
typedef struct roof_point {
  int64_t target_id;
  report_point p;
} roof_point;

#define REPORT_MAX_SERIES 32

typedef struct report {
  ts_db *db;
  const ts_bench_report_options *o;
  ts_error *err;
  strbuf summary;  /* rows of the summary table */
  strbuf sections; /* one section per workload × target */
  ts_db_job *jobs;
  int n_jobs;
  bool any_peak, any_roofline, any_vendor;
  ts_bench_report_stats stats;
  /* the roofline points of every target, and their series: tessera, then
   * the vendors in order of appearance */
  roof_point *points;
  int n_points, cap_points;
  report_series series[REPORT_MAX_SERIES];
  int n_series;
  cJSON *json_rows; /* with o->json: one object per summary row */
  /* the current workload (rows come ordered by workload) */
  int64_t workload_id;
  ts_db_workload w;
  ts_func *func; /* its function; NULL when the stored TIR does not parse */
  ts_dtype dtype;
  double bytes;           /* parameter bytes: the least a run moves */
  char note[300];         /* why dtype/bytes are unknown, or "" */
  unsigned long failures; /* ts_alloc_failures() as the report began */
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
  double intensity; /* FLOP/byte: the workload's FLOPs / r->bytes */
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
  ts_func_free(r->func);
  r->func = NULL;
  r->workload_id = id;
  r->dtype = (ts_dtype){0, 0, 0};
  r->bytes = 0;
  r->note[0] = 0;
  if (ts_db_get_workload(r->db, id, &r->w)) return db_fail(r);
  ts_func *f = NULL;
  if (ts_db_workload_func(r->db, id, &f)) {
    if (ts_db_error(r->db)->code == TS_ENOMEM) return db_fail(r);
    snprintf(r->note, sizeof r->note, "%s", ts_db_errmsg(r->db));
    return TS_OK;
  }
  int n = ts_func_n_params(f);
  for (int i = 0; i < n; i++) {
    const ts_buffer *b = ts_func_param(f, i);
    if (i == 0) r->dtype = ts_buffer_dtype(b);
    r->bytes += (double)ts_buffer_bytes(b);
  }
  r->func = f; /* kept for the lowered loops of the best schedule */
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
  t->peak = ts_bench_peak_of(probe, r->dtype, cores_of(row->target));
  free(probe);
  t->best_gflops =
      t->has_best && ts_db_record_seconds(&t->best) > 0 && row->flops > 0
          ? row->flops / ts_db_record_seconds(&t->best) * 1e-9
          : NAN;
  t->roofline = ts_bench_roofline_gflops(&t->peak, row->flops, r->bytes);
  t->intensity = intensity_of(row->flops, r->bytes);
  return TS_OK;
}

static void task_clear(task *t) {
  free(t->pts);
  ts_db_record_clear(&t->best);
  ts_db_baselines_free(t->vendors, t->n_vendors);
  memset(t, 0, sizeof *t);
}

/* "3 build_error, 1 timeout" or "—". */
static void failures_text(strbuf *b, const int64_t *by_status) {
  bool any = false;
  for (int s = 1; s < TS_DB_N_STATUS; s++) {
    if (!by_status[s]) continue;
    sb_printf(b, "%s%lld %s", any ? ", " : "", (long long)by_status[s],
              ts_db_status_name((ts_db_status)s));
    any = true;
  }
  if (!any) sb_puts(b, "—");
}

/* The fastest vendor level of a task, or NULL. */
static const ts_db_baseline *best_vendor(const task *t) {
  const ts_db_baseline *v = NULL;
  for (int i = 0; i < t->n_vendors; i++)
    if (!v || t->vendors[i].gflops > v->gflops) v = &t->vendors[i];
  return v;
}

/* tessera's best against a vendor level: the ratio of the confirmation's
 * rounds when the level was measured in them (side by side), else the
 * quotient of two figures measured apart; NAN without a best. */
static double vendor_ratio(const task *t, const ts_db_baseline *v, bool *side) {
  *side = v->side_rounds > 0 && isfinite(v->side_ratio);
  if (*side) return v->side_ratio;
  return isfinite(t->best_gflops) ? t->best_gflops / v->gflops : NAN;
}

/* The summary row of a task; the peak and vendor cells are written in all
 * rows and hidden by a class on the table when no row has them. */
static void summary_row(report *r, const task *t) {
  const ts_db_summary *row = t->row;
  strbuf *b = &r->summary;
  char lat[32], gf[32], pk[32], rl[32], st[400];
  sb_puts(b, "<tr><td class=\"num\">");
  if (t->index) sb_printf(b, "<a href=\"#task-%d\">%d</a>", t->index, t->index);
  sb_puts(b, "</td><td class=\"name\">");
  report_escape(b, row->name);
  sb_puts(b, "</td><td class=\"target\" title=\"");
  report_escape(b, row->target ? row->target : "");
  sb_puts(b, "\">");
  if (row->target) {
    short_target(row->target, st, sizeof st);
    report_escape(b, st);
  } else {
    sb_puts(b, "<span class=\"none\">no records</span>");
  }
  report_format_seconds(t->has_best ? ts_db_record_seconds(&t->best) : NAN,
                        lat);
  format_gflops(t->best_gflops, gf);
  format_percent(t->best_gflops, t->peak.gflops, pk);
  format_percent(t->best_gflops, t->roofline, rl);
  sb_printf(b,
            "</td><td class=\"num\">%s</td><td class=\"num\">%s</td>"
            "<td class=\"num peak\">%s</td><td class=\"num roofline\">%s"
            "</td><td class=\"vendor\">",
            lat, gf, pk, rl);
  const ts_db_baseline *v = best_vendor(t);
  if (v) {
    char vg[32];
    format_gflops(v->gflops, vg);
    report_escape(b, v->vendor);
    sb_printf(b, " %s", vg);
    bool side;
    double ratio = vendor_ratio(t, v, &side);
    if (isfinite(ratio))
      sb_printf(b, " <span class=\"ratio\" title=\"%s\">(×%.2f%s)</span>",
                side ? "the median of the confirmation's interleaved "
                       "rounds: tessera and the vendor timed in the same "
                       "seconds"
                     : "two figures measured apart (tessera db confirm "
                       "measures them side by side)",
                ratio, side ? " side by side" : ", apart");
  } else {
    sb_puts(b, "—");
  }
  sb_printf(b,
            "</td><td class=\"num\">%lld</td><td class=\"num\">%lld</td>"
            "<td class=\"failed\">",
            (long long)row->n_records, (long long)row->n_ok);
  failures_text(b, t->by_status);
  sb_puts(b, "</td></tr>\n");
}

/* The lowered loop program of f scheduled by `trace` for the target
 * target_str, as `tessera show --db ... --best --lowered` prints it: the
 * trace replayed on f and built by ts_build keeping the lowered function
 * (LLVM's optimization passes are skipped: they run after lowering and do
 * not change it). A malloc'd text, or NULL with err set. */
static char *lowered_text(const ts_func *f, const ts_trace *trace,
                          const char *target_str, ts_error *err) {
  ts_target *target = NULL;
  ts_sched *sch = NULL;
  char *text = NULL;
  if (ts_target_parse(target_str, &target, err) == TS_OK &&
      ts_trace_apply(trace, f, 1, &sch, err) == TS_OK) {
    ts_build_options o = ts_build_defaults();
    o.keep_lowered = true;
    o.no_opt = true;
    ts_build_result built;
    if (ts_build(ts_sched_func(sch), target, &o, &built, err) == TS_OK) {
      text = ts_func_print(built.lowered);
      ts_build_result_clear(&built);
    }
  }
  ts_sched_destroy(sch);
  ts_target_free(target);
  return text;
}

/* Lowered programs longer than this are cut (at a line end) on the page. */
#define LOWERED_MAX_BYTES 65536

/* The best schedule's lowered loops, folded: the program `tessera show
 * --best --lowered` prints, HTML-escaped, cut at LOWERED_MAX_BYTES; the
 * reason when it cannot be made. */
static void lowered_block(report *r, const task *t, const ts_trace *trace) {
  strbuf *b = &r->sections;
  ts_error err;
  ts_error_clear(&err);
  char *text = NULL;
  if (r->func)
    text = lowered_text(r->func, trace, t->row->target, &err);
  else
    snprintf(err.msg, sizeof err.msg, "the workload's TIR does not parse");
  sb_puts(b, "<details class=\"lowered\"><summary>lowered loops of the "
             "best schedule");
  if (!text) {
    sb_puts(b, "</summary>\n<p class=\"warn\">cannot lower it: ");
    report_escape(b, err.msg[0] ? err.msg : "unknown error");
    sb_puts(b, "</p>\n</details>\n");
    return;
  }
  size_t len = strlen(text), cut = len;
  long lines = 0, shown = 0;
  for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
  if (len > LOWERED_MAX_BYTES) {
    cut = LOWERED_MAX_BYTES;
    while (cut > 0 && text[cut - 1] != '\n') cut--;
  }
  for (size_t i = 0; i < cut; i++) shown += text[i] == '\n';
  sb_printf(b, " (%ld lines)</summary>\n<pre>", lines);
  text[cut] = 0;
  report_escape(b, text);
  sb_puts(b, "</pre>\n");
  if (cut < len) {
    sb_printf(b,
              "<p class=\"how\">the first %ld of %ld lines: <code>"
              "tessera show --db DB --workload ",
              shown, lines);
    report_escape(b, t->row->hash);
    sb_puts(b, " --target T --best --lowered</code> prints them all</p>\n");
  }
  sb_puts(b, "</details>\n");
  free(text);
}

/* The best record's trace as a readable script, then its lowered loops;
 * the JSON when it does not parse (with the reason). */
static void trace_block(report *r, const task *t) {
  strbuf *b = &r->sections;
  const ts_db_record *rec = &t->best;
  sb_printf(b,
            "<details class=\"trace\" open><summary>best schedule: "
            "record %lld",
            (long long)rec->id);
  if (rec->job_id) {
    const char *job = job_of(r, rec->job_id);
    sb_puts(b, ", job ");
    report_escape(b, job ? job : "?");
    sb_printf(b, " trial %lld", (long long)rec->trial);
  }
  if (rec->worker && rec->worker[0]) {
    sb_puts(b, ", worker ");
    report_escape(b, rec->worker);
  }
  sb_puts(b, ", ");
  report_escape(b, rec->created);
  sb_puts(b, "</summary>\n");
  ts_trace *trace = NULL;
  ts_error terr;
  ts_error_clear(&terr);
  const char *json = rec->trace_json ? rec->trace_json : "";
  if (ts_trace_from_json(json, strlen(json), &trace, &terr) == TS_OK) {
    char *script = ts_trace_print(trace);
    sb_puts(b, "<pre>");
    report_escape(b, script);
    sb_puts(b, "</pre>\n</details>\n");
    free(script);
    lowered_block(r, t, trace);
    ts_trace_free(trace);
  } else {
    sb_puts(b, "<p class=\"warn\">the trace does not parse: ");
    report_escape(b, terr.msg);
    sb_puts(b, "</p>\n<pre>");
    report_escape(b, json);
    sb_puts(b, "</pre>\n</details>\n");
  }
}

static void section(report *r, const task *t) {
  const ts_db_summary *row = t->row;
  strbuf *b = &r->sections;
  char st[400], s1[32], s2[32], s3[32];
  short_target(row->target, st, sizeof st);
  sb_printf(b,
            "<section class=\"task\" id=\"task-%d\">\n<h3><a "
            "href=\"#task-%d\">#%d</a> ",
            t->index, t->index, t->index);
  report_escape(b, row->name);
  sb_puts(b, " <span class=\"on\">on</span> <span class=\"target\" title=\"");
  report_escape(b, row->target);
  sb_puts(b, "\">");
  report_escape(b, st);
  sb_puts(b, "</span></h3>\n<ul class=\"facts\">\n");
  ts_target *tt = NULL;
  if (row->target && ts_target_parse(row->target, &tt, NULL) == TS_OK) {
    char isa[160];
    sb_puts(b, "<li>ISA ");
    report_escape(b, ts_target_isa(tt, isa, sizeof isa));
    sb_puts(b, "</li>\n");
    ts_target_free(tt);
  }
  sb_puts(b, "<li>workload <code>");
  report_escape(b, row->hash);
  format_flops(row->flops, s1);
  sb_printf(b, "</code> · %s", s1);
  if (r->dtype.bits) {
    char dt[32];
    sb_printf(b, " · %s", ts_dtype_str(r->dtype, dt));
  }
  if (isfinite(t->intensity))
    sb_printf(b,
              " · %.3g FLOP/byte (its FLOPs over the %.0f bytes of its "
              "parameters: <a href=\"#roofline-%lld\">roofline</a>)",
              t->intensity, r->bytes, (long long)row->target_id);
  sb_puts(b, "</li>\n");
  if (r->note[0]) {
    sb_puts(b, "<li class=\"warn\">");
    report_escape(b, r->note);
    sb_puts(b, "</li>\n");
  }
  sb_printf(b, "<li>%lld measurements: %lld ok, failed: ", (long long)t->n_pts,
            (long long)t->by_status[TS_DB_STATUS_OK]);
  failures_text(b, t->by_status);
  sb_puts(b, "</li>\n<li>best: ");
  if (t->has_best) {
    report_format_seconds(ts_db_record_seconds(&t->best), s1);
    format_gflops(t->best_gflops, s2);
    sb_printf(b, "%s · %s GFLOP/s", s1, s2);
    if (isfinite(t->peak.gflops)) {
      format_percent(t->best_gflops, t->peak.gflops, s1);
      format_gflops(t->peak.gflops, s3);
      sb_printf(b, " · %s of peak (%s GFLOP/s, ", s1, s3);
      report_escape(b, t->peak.source);
      sb_puts(b, ")");
      if (t->best_gflops > t->peak.gflops)
        sb_puts(b, " <span class=\"warn\">above the probed peak: the "
                   "probe ran slow; run <code>tessera probe</code> again "
                   "on an idle machine</span>");
    }
    if (isfinite(t->roofline)) {
      format_percent(t->best_gflops, t->roofline, s1);
      format_gflops(t->roofline, s3);
      sb_printf(b, " · %s of the roofline bound (%s GFLOP/s)", s1, s3);
    }
    /* which figure the headline is: a confirmed median or the luckiest
     * search-time measurement */
    if (t->best.confirmed_rounds > 0)
      sb_printf(b,
                " <span class=\"how\">(confirmed: median of %d "
                "interleaved rounds of the top schedules, spread "
                "%.0f%%)</span>",
                t->best.confirmed_rounds, t->best.confirmed_spread * 100);
    else
      sb_puts(b, " <span class=\"how\">(search-time figure, not "
                 "confirmed: <code>tessera db confirm</code> measures "
                 "the top schedules again side by side)</span>");
  } else {
    sb_puts(b, "no successful measurement");
  }
  sb_puts(b, "</li>\n");
  for (int i = 0; i < t->n_vendors; i++) {
    const ts_db_baseline *v = &t->vendors[i];
    format_gflops(v->gflops, s1);
    sb_puts(b, "<li>vendor ");
    report_escape(b, v->vendor);
    sb_printf(b, " (%d thread%s): %s GFLOP/s", v->threads,
              v->threads == 1 ? "" : "s", s1);
    bool side;
    double ratio = vendor_ratio(t, v, &side);
    if (side)
      sb_printf(b,
                " · tessera ×%.2f <strong>side by side</strong> (median "
                "of %d interleaved rounds of the confirmation, tessera's "
                "confirmed best and %s timed in the same seconds)",
                ratio, v->side_rounds, v->vendor);
    else if (isfinite(ratio))
      sb_printf(b,
                " · tessera ×%.2f <span class=\"how\">measured apart "
                "(%s best against this figure; <code>tessera db "
                "confirm</code> times both side by side)</span>",
                ratio,
                t->best.confirmed_rounds > 0 ? "the confirmed"
                                             : "the search-time");
    sb_puts(b, ", measured ");
    report_escape(b, v->created);
    sb_puts(b, "</li>\n");
  }
  sb_puts(b, "</ul>\n<div class=\"charts\">\n");

  /* the curve: GFLOP/s per measurement, or latency when FLOPs are 0 */
  bool by_flops = row->flops > 0;
  double *values =
      ts_malloc(sizeof *values * (size_t)(t->n_pts ? t->n_pts : 1));
  double *secs = ts_malloc(sizeof *secs * (size_t)(t->n_pts ? t->n_pts : 1));
  if (!values || !secs) {
    free(values);
    free(secs);
    sb_fail(b);
    return;
  }
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
  report_level *levels = ts_calloc((size_t)n_levels + 1, sizeof *levels);
  report_level *marks = ts_calloc((size_t)n_levels + 1, sizeof *marks);
  if (!levels || !marks) {
    free(levels);
    free(marks);
    free(values);
    free(secs);
    sb_fail(b);
    return;
  }
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
  sb_printf(b,
            "</div>\n<p class=\"legend\"><span class=\"k-best\">━</span> "
            "best %s so far <span class=\"k-trial\">●</span> each "
            "measurement%s%s</p>\n",
            by_flops ? "GFLOP/s" : "latency",
            failed ? " <span class=\"k-fail\">┃</span> failed measurements"
                   : "",
            n_levels ? " <span class=\"k-level\">╌</span> vendor library" : "");
  if (t->has_best) trace_block(r, t);
  sb_puts(b, "<details class=\"tir\"><summary>workload TIR</summary><pre>");
  report_escape(b, r->w.tir);
  sb_puts(b, "</pre></details>\n</section>\n");
}

/* The probed figures of every target in the report (numbers only). */
static int targets_table(report *r, const ts_db_summary *rows, int n,
                         strbuf *b) {
  bool header = false;
  for (int i = 0; i < n; i++) {
    if (!first_of_target(rows, i)) continue;
    char *probe = NULL;
    if (ts_db_get_target_probe(r->db, rows[i].target_id, &probe))
      return db_fail(r);
    if (!header) {
      sb_puts(b, "<h2>Targets</h2>\n<table class=\"targets\"><thead><tr>"
                 "<th scope=\"col\">target</th><th scope=\"col\">probed "
                 "figures (<code>tessera probe</code>)</th></tr></thead>"
                 "<tbody>\n");
      header = true;
    }
    char st[400];
    short_target(rows[i].target, st, sizeof st);
    sb_puts(b, "<tr><td>");
    report_escape(b, st);
    ts_target *tt = NULL;
    if (rows[i].target && ts_target_parse(rows[i].target, &tt, NULL) == TS_OK) {
      char isa[160];
      sb_puts(b, "<br>ISA: ");
      report_escape(b, ts_target_isa(tt, isa, sizeof isa));
      ts_target_free(tt);
    }
    sb_puts(b, "<br><code class=\"full\">");
    report_escape(b, rows[i].target);
    sb_puts(b, "</code></td><td>");
    cJSON *p = probe ? cJSON_Parse(probe) : NULL;
    const cJSON *figures = cJSON_IsObject(p) ? p : NULL;
    bool any = false;
    const cJSON *item;
    cJSON_ArrayForEach(item, figures) {
      if (!cJSON_IsNumber(item) || !item->string) continue;
      sb_puts(b, any ? " · " : "");
      report_escape(b, item->string);
      sb_printf(b, " = %.4g", item->valuedouble);
      any = true;
    }
    if (!any)
      sb_puts(b, probe ? "(no numeric figures)"
                       : "not probed (<code>tessera probe</code>)");
    cJSON_Delete(p);
    free(probe);
    sb_puts(b, "</td></tr>\n");
  }
  if (header) sb_puts(b, "</tbody></table>\n");
  return TS_OK;
}

/* ---- the rooflines ---- */

/* The roofs of a target's roofline, from its probe figures. */
typedef struct roofs {
  report_level compute[8], memory[4];         /* label and GFLOP/s or GB/s */
  char compute_key[8][64], memory_key[4][64]; /* the probe keys */
  int n_compute, n_memory;
} roofs;

/* Appends a roof (label, probe key, value) to levels/keys when there is
 * room. */
static void add_roof(report_level *levels, char (*keys)[64], int *n, int cap,
                     const char *label, const char *key, double value) {
  if (*n >= cap) return;
  snprintf(levels[*n].label, sizeof levels[*n].label, "%s", label);
  snprintf(keys[*n], sizeof keys[*n], "%s", key);
  levels[*n].value = value;
  (*n)++;
}

/* The roofs of a target with num_cores cores from its probe JSON (NULL or
 * malformed: none). Compute: the fp32 FMA peak on all cores per vector
 * width ("fp32_gflops_all_cores_512", ...), else the fp32 peak the % of
 * peak uses; the fp64, AMX bf16 and AMX int8 peaks by the same rules
 * (ts_bench_peak_of). Memory: "mem_copy_gbs", "mem_triad_gbs", and
 * "mem_bandwidth_gbs" unless it repeats one of those. */
static void roofs_of(const char *probe_json, int num_cores, roofs *out) {
  static const int widths[] = {512, 256, 128};
  static const struct {
    ts_dtype dtype;
    const char *label;
  } kinds[] = {{TS_FLOAT32, "fp32 FMA"},
               {TS_FLOAT64, "fp64 FMA"},
               {TS_BFLOAT16, "bf16 AMX"},
               {TS_INT8, "int8 AMX"}};
  memset(out, 0, sizeof *out);
  cJSON *probe = probe_json ? cJSON_Parse(probe_json) : NULL;
  if (!cJSON_IsObject(probe)) {
    cJSON_Delete(probe);
    return;
  }
  for (int i = 0; i < 3; i++) {
    char key[64], label[64];
    snprintf(key, sizeof key, "fp32_gflops_all_cores_%d", widths[i]);
    snprintf(label, sizeof label, "fp32 FMA, %d-bit vectors", widths[i]);
    double v = probe_number(probe, key);
    if (isfinite(v))
      add_roof(out->compute, out->compute_key, &out->n_compute, 8, label, key,
               v);
  }
  for (int i = out->n_compute ? 1 : 0; i < 4; i++) {
    ts_bench_peak p = ts_bench_peak_of(probe_json, kinds[i].dtype, num_cores);
    if (isfinite(p.gflops))
      add_roof(out->compute, out->compute_key, &out->n_compute, 8,
               kinds[i].label, p.source, p.gflops);
  }
  double copy = probe_number(probe, "mem_copy_gbs");
  double triad = probe_number(probe, "mem_triad_gbs");
  double any = probe_number(probe, "mem_bandwidth_gbs");
  if (isfinite(copy))
    add_roof(out->memory, out->memory_key, &out->n_memory, 4, "memory copy",
             "mem_copy_gbs", copy);
  if (isfinite(triad))
    add_roof(out->memory, out->memory_key, &out->n_memory, 4, "memory triad",
             "mem_triad_gbs", triad);
  if (isfinite(any) && any != copy && any != triad)
    add_roof(out->memory, out->memory_key, &out->n_memory, 4, "memory",
             "mem_bandwidth_gbs", any);
  cJSON_Delete(probe);
}

/* The series of a vendor: found, or added with the vendor's own colour
 * (openblas, onednn and naive keep theirs on every page; other names take
 * the rest of the palette in order of appearance). */
static int vendor_series(report *r, const char *vendor) {
  if (!r->n_series) r->series[r->n_series++] = (report_series){"tessera", 0};
  for (int i = 1; i < r->n_series; i++)
    if (!strcmp(r->series[i].name, vendor)) return i;
  if (r->n_series == REPORT_MAX_SERIES) return r->n_series - 1;
  int colour = 0;
  for (int v = 0; v < TS_BENCH_N_VENDORS; v++)
    if (!strcmp(vendor, ts_bench_vendor_name((ts_bench_vendor)v)))
      colour = 1 + v;
  if (!colour) {
    int others = 0;
    for (int i = 1; i < r->n_series; i++)
      others += r->series[i].colour > TS_BENCH_N_VENDORS;
    colour = 1 + TS_BENCH_N_VENDORS +
             others % (REPORT_N_COLOURS - 1 - TS_BENCH_N_VENDORS);
  }
  report_series *s = &r->series[r->n_series++];
  snprintf(s->name, sizeof s->name, "%s", vendor);
  s->colour = colour;
  return r->n_series - 1;
}

/* Keeps a point of the task's target roofline. */
static void add_point(report *r, const task *t, int series, double gflops,
                      const char *label) {
  if (r->n_points == r->cap_points) {
    int cap = r->cap_points ? 2 * r->cap_points : 64;
    roof_point *pts = ts_realloc(r->points, sizeof *pts * (size_t)cap);
    if (!pts) { /* the page is not written: see ts_bench_report_write */
      sb_fail(&r->sections);
      return;
    }
    r->points = pts;
    r->cap_points = cap;
  }
  roof_point *p = &r->points[r->n_points++];
  p->target_id = t->row->target_id;
  p->p = (report_point){.intensity = t->intensity,
                        .gflops = gflops,
                        .series = series,
                        .task = t->index};
  snprintf(p->p.label, sizeof p->p.label, "%s", label);
}

/* The task's points on its target's roofline: tessera's best and each
 * vendor level, at the workload's arithmetic intensity (none when it is
 * unknown). */
static void collect_points(report *r, const task *t) {
  if (!isfinite(t->intensity)) return;
  if (!r->n_series) r->series[r->n_series++] = (report_series){"tessera", 0};
  char label[256], g[32], pc[32];
  if (t->best_gflops > 0) {
    format_gflops(t->best_gflops, g);
    format_percent(t->best_gflops, t->roofline, pc);
    snprintf(label, sizeof label,
             "#%d %s: tessera %s GFLOP/s at %.3g FLOP/byte%s%s", t->index,
             t->row->name, g, t->intensity,
             isfinite(t->roofline) ? ", % of the roofline: " : "",
             isfinite(t->roofline) ? pc : "");
    add_point(r, t, 0, t->best_gflops, label);
  }
  for (int i = 0; i < t->n_vendors; i++) {
    const ts_db_baseline *v = &t->vendors[i];
    if (!(v->gflops > 0)) continue;
    format_gflops(v->gflops, g);
    snprintf(label, sizeof label, "#%d %s: %s (%d thread%s) %s GFLOP/s",
             t->index, t->row->name, v->vendor, v->threads,
             v->threads == 1 ? "" : "s", g);
    add_point(r, t, vendor_series(r, v->vendor), v->gflops, label);
  }
}

/* One target's roofline: its chart, or a note saying why there is none
 * and, without roofs, the command that measures them. */
static int roofline_section(report *r, const ts_db_summary *row, strbuf *b) {
  char *probe = NULL;
  if (ts_db_get_target_probe(r->db, row->target_id, &probe)) return db_fail(r);
  roofs rf;
  roofs_of(probe, cores_of(row->target), &rf);
  char st[400];
  short_target(row->target, st, sizeof st);
  sb_printf(b,
            "<section class=\"roofline\" id=\"roofline-%lld\">\n<h3>"
            "<span class=\"target\" title=\"",
            (long long)row->target_id);
  report_escape(b, row->target);
  sb_puts(b, "\">");
  report_escape(b, st);
  sb_puts(b, "</span></h3>\n");
  if (!rf.n_compute && !rf.n_memory) {
    sb_puts(b, probe ? "<p class=\"warn\">The probe figures of this target "
                       "have no FMA peak or memory bandwidth: no roofs."
                     : "<p class=\"warn\">Not probed: no roofs.");
    sb_puts(b, " Measure them on the machine of this target with "
               "<code>tessera probe --db ");
    report_escape(b, ts_db_path(r->db));
    sb_puts(b, " --target &quot;");
    report_escape(b, row->target);
    sb_puts(b, "&quot;</code>.</p>\n");
  }
  free(probe);
  int n = 0;
  report_point *pts = ts_malloc(sizeof *pts * (size_t)(r->n_points + 1));
  if (!pts) return TS_ERR(r->err, TS_ENOMEM, "report: out of memory");
  for (int i = 0; i < r->n_points; i++)
    if (r->points[i].target_id == row->target_id) pts[n++] = r->points[i].p;
  if (n || rf.n_compute || rf.n_memory)
    report_svg_roofline(b, rf.compute, rf.n_compute, rf.memory, rf.n_memory,
                        pts, n, r->series, r->n_series);
  free(pts);
  sb_puts(b, "</section>\n");
  return TS_OK;
}

/* The roofline of every target in the report. */
static int rooflines(report *r, const ts_db_summary *rows, int n, strbuf *b) {
  bool header = false;
  for (int i = 0; i < n; i++) {
    if (!first_of_target(rows, i)) continue;
    if (!header) {
      sb_puts(b,
              "<h2>Rooflines</h2>\n<p class=\"legend\">One chart per target. "
              "x: arithmetic intensity, the workload's FLOPs over the bytes "
              "of its parameters (the least any schedule moves); y: GFLOP/s; "
              "both log scales. Horizontal roofs: the probed FMA peaks; "
              "slanted roofs: the probed memory bandwidths. Dots: each "
              "workload's best (tessera, numbered by its section) and each "
              "stored vendor level.</p>\n");
      header = true;
    }
    int rc = roofline_section(r, &rows[i], b);
    if (rc) return rc;
  }
  return TS_OK;
}

/* ---- the report's data as JSON ---- */

/* v under key, or null when it is not a finite number. */
static void add_number(cJSON *o, const char *key, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, key, v);
  else
    cJSON_AddNullToObject(o, key);
}

/* s under key, or null. */
static void add_string(cJSON *o, const char *key, const char *s) {
  if (s)
    cJSON_AddStringToObject(o, key, s);
  else
    cJSON_AddNullToObject(o, key);
}

/* The JSON object of a summary row (the shape is in docs/report.md). */
static void json_row(report *r, const task *t) {
  const ts_db_summary *row = t->row;
  cJSON *o = cJSON_CreateObject();
  char dt[32];
  cJSON_AddStringToObject(o, "workload", row->name);
  cJSON_AddStringToObject(o, "hash", row->hash);
  add_number(o, "flops", row->flops);
  add_string(o, "dtype", r->dtype.bits ? ts_dtype_str(r->dtype, dt) : NULL);
  add_number(o, "bytes", r->bytes > 0 ? r->bytes : NAN);
  add_number(o, "intensity", intensity_of(row->flops, r->bytes));
  add_string(o, "target", row->target);
  cJSON_AddNumberToObject(o, "records", (double)row->n_records);
  cJSON_AddNumberToObject(o, "ok", (double)row->n_ok);
  cJSON *failed = cJSON_AddObjectToObject(o, "failed");
  for (int s = 1; s < TS_DB_N_STATUS; s++)
    if (t->by_status[s])
      cJSON_AddNumberToObject(failed, ts_db_status_name((ts_db_status)s),
                              (double)t->by_status[s]);
  add_number(o, "best_record", t->has_best ? (double)t->best.id : NAN);
  add_number(o, "best_seconds",
             t->has_best ? ts_db_record_seconds(&t->best) : NAN);
  cJSON_AddBoolToObject(o, "confirmed",
                        t->has_best && t->best.confirmed_rounds > 0);
  add_number(o, "gflops", t->best_gflops);
  add_number(o, "peak_gflops", t->peak.gflops);
  add_string(o, "peak_source",
             isfinite(t->peak.gflops) ? t->peak.source : NULL);
  add_number(o, "peak_percent", 100 * t->best_gflops / t->peak.gflops);
  add_number(o, "bandwidth_gbs", t->peak.bandwidth_gbs);
  add_number(o, "roofline_gflops", t->roofline);
  add_number(o, "roofline_percent", 100 * t->best_gflops / t->roofline);
  cJSON *vendors = cJSON_AddArrayToObject(o, "vendors");
  for (int i = 0; i < t->n_vendors; i++) {
    const ts_db_baseline *v = &t->vendors[i];
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "vendor", v->vendor);
    cJSON_AddNumberToObject(x, "threads", v->threads);
    add_number(x, "gflops", v->gflops);
    bool side;
    add_number(x, "ratio", vendor_ratio(t, v, &side));
    cJSON_AddBoolToObject(x, "side_by_side", side);
    cJSON_AddNumberToObject(x, "side_rounds", side ? v->side_rounds : 0);
    cJSON_AddStringToObject(x, "created", v->created);
    ts_json_add(vendors, NULL, x);
  }
  ts_json_add(r->json_rows, NULL, o);
}

/* One kind of roof as a JSON array under `name`: label, probe key and
 * value (under `unit`). */
static void roofs_json(cJSON *o, const char *name, const char *unit,
                       const report_level *levels, const char (*keys)[64],
                       int n) {
  cJSON *arr = cJSON_AddArrayToObject(o, name);
  for (int k = 0; k < n; k++) {
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "label", levels[k].label);
    cJSON_AddStringToObject(x, "key", keys[k]);
    cJSON_AddNumberToObject(x, unit, levels[k].value);
    ts_json_add(arr, NULL, x);
  }
}

/* The targets of the report as JSON: each with its probe figures (the
 * stored object, or null) and the roofs drawn from them. */
static int json_targets(report *r, const ts_db_summary *rows, int n,
                        cJSON *out) {
  for (int i = 0; i < n; i++) {
    if (!first_of_target(rows, i)) continue;
    char *probe = NULL;
    if (ts_db_get_target_probe(r->db, rows[i].target_id, &probe))
      return db_fail(r);
    cJSON *o = cJSON_CreateObject();
    char st[400];
    short_target(rows[i].target, st, sizeof st);
    cJSON_AddStringToObject(o, "target", rows[i].target);
    cJSON_AddStringToObject(o, "short", st);
    cJSON *p = probe ? cJSON_Parse(probe) : NULL;
    if (cJSON_IsObject(p))
      ts_json_add(o, "probe", p);
    else {
      cJSON_Delete(p);
      cJSON_AddNullToObject(o, "probe");
    }
    roofs rf;
    roofs_of(probe, cores_of(rows[i].target), &rf);
    free(probe);
    cJSON *roof = cJSON_AddObjectToObject(o, "roofs");
    roofs_json(roof, "compute", "gflops", rf.compute, rf.compute_key,
               rf.n_compute);
    roofs_json(roof, "memory", "gbs", rf.memory, rf.memory_key, rf.n_memory);
    ts_json_add(out, NULL, o);
  }
  return TS_OK;
}

/* Writes the report's data as one JSON object (indented) and a newline. */
static int write_json(report *r, const ts_db_summary *rows, int n, FILE *out) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "format", "tessera-report");
  cJSON_AddNumberToObject(o, "format_version", 1);
  cJSON_AddStringToObject(o, "tessera", TS_VERSION);
  cJSON_AddStringToObject(
      o, "title",
      r->o->title && r->o->title[0] ? r->o->title : "tessera tuning report");
  cJSON_AddStringToObject(o, "database", ts_db_path(r->db));
  if (r->o->timestamp) {
    char when[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    cJSON_AddStringToObject(o, "made", when);
  }
  cJSON_AddNumberToObject(o, "workloads", r->stats.workloads);
  cJSON_AddNumberToObject(o, "pairs", r->stats.tasks);
  cJSON_AddNumberToObject(o, "records", (double)r->stats.records);
  int rc = json_targets(r, rows, n, cJSON_AddArrayToObject(o, "targets"));
  if (rc) {
    cJSON_Delete(o);
    return rc;
  }
  ts_json_add(o, "rows", r->json_rows);
  r->json_rows = NULL;
  char *text = ts_json_print(o, r->failures, true);
  cJSON_Delete(o);
  if (!text) return TS_ERR(r->err, TS_ENOMEM, "out of memory for the JSON");
  size_t len = strlen(text);
  bool ok = fwrite(text, 1, len, out) == len && fputc('\n', out) != EOF &&
            fflush(out) == 0;
  cJSON_free(text);
  r->stats.bytes = (int64_t)len + 1;
  if (!ok)
    return TS_ERR(r->err, TS_EIO, "writing the report: %s", strerror(errno));
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
    "solid #d1d9e0;text-align:left;vertical-align:top}th{background:#f6f8fa;"
    "position:sticky;top:0;border-bottom:2px solid #d1d9e0;font-weight:600}"
    "th[title]{text-decoration:underline dotted;cursor:help}"
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
    ".charts{display:grid;grid-template-columns:repeat(auto-fit,minmax("
    "460px,1fr));gap:8px}\n"
    "svg.chart{display:block;width:100%;height:auto;font-size:11px;"
    "fill:#1f2328}\n"
    "section.roofline{margin-top:12px}section.roofline svg.chart{"
    "max-width:1200px}\n"
    "svg .roof line{stroke:#1f2328;stroke-width:2}svg .roof.memory line{"
    "stroke:#59636e}svg .roof text{fill:#1f2328}\n"
    "svg .points circle{stroke:#fff;stroke-width:1}svg .pt-label{"
    "fill:#0969da;font-size:10px}\n"
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
                      const strbuf *targets, FILE *out) {
  strbuf head = {0};
  const char *title =
      r->o->title && r->o->title[0] ? r->o->title : "tessera tuning report";
  sb_puts(&head, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n"
                 "<meta charset=\"utf-8\">\n<meta name=\"viewport\" "
                 "content=\"width=device-width, initial-scale=1\">\n"
                 "<title>");
  report_escape(&head, title);
  sb_printf(&head, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<h1>",
            style);
  report_escape(&head, title);
  sb_puts(&head, "</h1>\n<p class=\"meta\">database <code>");
  report_escape(&head, ts_db_path(r->db));
  sb_printf(&head,
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
    sb_printf(&head, " · made %s by tessera %s", when, TS_VERSION);
  }
  sb_puts(&head, "</p>\n<h2>Summary</h2>\n");
  if (!n) {
    sb_puts(&head, "<p class=\"empty\">The database holds no workloads "
                   "yet: run <code>tessera tune</code> to fill it.</p>\n");
  } else {
    sb_printf(
        &head,
        "<table class=\"summary%s%s%s\"><thead><tr>"
        "<th scope=\"col\" title=\"section number\">#</th>"
        "<th scope=\"col\">workload</th><th scope=\"col\">target</th>"
        "<th scope=\"col\" title=\"median latency of the fastest ok record "
        "(confirmed when it was)\">best latency</th>"
        "<th scope=\"col\" title=\"FLOPs / best latency\">best GFLOP/s</th>"
        "<th scope=\"col\" class=\"peak\" title=\"best GFLOP/s / the probed "
        "peak for the workload&#39;s dtype\">%% of peak</th>"
        "<th scope=\"col\" class=\"roofline\" title=\"best GFLOP/s / min("
        "peak, FLOP/byte × memory bandwidth)\">%% of roofline</th>"
        "<th scope=\"col\" class=\"vendor\" title=\"the fastest stored vendor "
        "level, and tessera&#39;s best over it\">best vendor GFLOP/s "
        "(tessera ×)</th>"
        "<th scope=\"col\" title=\"measurements, every status\">records</th>"
        "<th scope=\"col\" title=\"successful measurements\">ok</th>"
        "<th scope=\"col\">failed, by status</th></tr></thead><tbody>\n",
        r->any_peak ? "" : " no-peak", r->any_roofline ? "" : " no-roofline",
        r->any_vendor ? "" : " no-vendor");
  }
  if (head.failed) {
    sb_free(&head);
    return TS_ERR(r->err, TS_ENOMEM, "report: out of memory while drawing it");
  }
  bool ok = fwrite(head.data, 1, head.len, out) == head.len;
  r->stats.bytes += (int64_t)head.len;
  sb_free(&head);
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
  /* a part that could not be drawn for lack of memory is often left out
   * quietly (a note, an empty chart): the failure count says whether any
   * was, and then nothing is written */
  unsigned long failures = ts_alloc_failures();
  r.failures = failures;
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
  strbuf targets = {0};
  if (o.json) r.json_rows = cJSON_CreateArray();
  for (int i = 0; i < n && rc == TS_OK; i++) {
    task t = {.row = &rows[i],
              .peak = {NAN, NAN, ""},
              .roofline = NAN,
              .best_gflops = NAN,
              .intensity = NAN};
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
      if (!o.json) {
        section(&r, &t);
        collect_points(&r, &t);
      }
    }
    if (o.json)
      json_row(&r, &t);
    else
      summary_row(&r, &t);
    task_clear(&t);
  }
  if (rc == TS_OK && o.json && ts_alloc_failures() != failures)
    rc = TS_ERR(err, TS_ENOMEM, "report: out of memory");
  if (rc == TS_OK && o.json) rc = write_json(&r, rows, n, out);
  if (rc == TS_OK && !o.json) rc = targets_table(&r, rows, n, &targets);
  if (rc == TS_OK && !o.json) rc = rooflines(&r, rows, n, &targets);
  if (rc == TS_OK && !o.json &&
      (targets.failed || r.summary.failed || r.sections.failed ||
       ts_alloc_failures() != failures))
    rc = TS_ERR(err, TS_ENOMEM, "report: out of memory while drawing it");
  if (rc == TS_OK && !o.json) rc = write_page(&r, rows, n, &targets, out);
  if (rc == TS_OK && stats) *stats = r.stats;
  sb_free(&targets);
  sb_free(&r.summary);
  sb_free(&r.sections);
  free(r.points);
  cJSON_Delete(r.json_rows);
  ts_func_free(r.func);
  ts_db_workload_clear(&r.w);
  ts_db_jobs_free(r.jobs, r.n_jobs);
  ts_db_summaries_free(rows, n);
  return rc;
}
