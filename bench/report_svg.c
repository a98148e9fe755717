/*
 * report_svg.c — the charts of the tuning report, drawn as inline SVG text
 * (no scripts, no fonts beyond the page's): the tuning curve (best figure so
 * far against the measurement index, with every measurement as a dot, failed
 * measurements as ticks under the axis and vendor levels as dashed lines)
 * and the histogram of measured latencies. Both stay small whatever the
 * number of measurements: dots become one min-max bar per x bucket and the
 * curve keeps a bounded number of vertices. And the roofline of a target:
 * its probed compute and memory roofs on log-log axes, with each
 * workload's best and each vendor level as a dot at the workload's
 * arithmetic intensity. Also the report's HTML escaping, shared with
 * report.c.
 */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- HTML text ---- */

void report_escape(strbuf *b, const char *s) {
  if (!s) return;
  for (const char *p = s; *p;) {
    size_t run = strcspn(p, "&<>\"'");
    if (run) {
      sb_putn(b, p, run);
      p += run;
    }
    switch (*p) {
    case '&': sb_puts(b, "&amp;"); break;
    case '<': sb_puts(b, "&lt;"); break;
    case '>': sb_puts(b, "&gt;"); break;
    case '"': sb_puts(b, "&quot;"); break;
    case '\'': sb_puts(b, "&#39;"); break;
    default: continue; /* the end of the string */
    }
    p++;
  }
}

void report_format_seconds(double s, char out[32]) {
  if (!isfinite(s)) {
    snprintf(out, 32, "—");
  } else if (s < 1e-6) {
    snprintf(out, 32, "%.3g ns", s * 1e9);
  } else if (s < 1e-3) {
    snprintf(out, 32, "%.3g µs", s * 1e6);
  } else if (s < 1) {
    snprintf(out, 32, "%.3g ms", s * 1e3);
  } else {
    snprintf(out, 32, "%.3g s", s);
  }
}

/* ---- axes ---- */

/* The chart geometry: the plot area inside the SVG's view box. */
typedef struct frame {
  double width, height;   /* view box */
  double left, top, w, h; /* plot area */
  double x0, x1, y0, y1;  /* data ranges (x in log10 when x_log) */
  bool x_log;
} frame;

static double px(const frame *f, double x) {
  if (f->x_log) x = log10(x);
  return f->left + f->w * (x - f->x0) / (f->x1 - f->x0);
}

static double py(const frame *f, double y) {
  return f->top + f->h * (1 - (y - f->y0) / (f->y1 - f->y0));
}

/* A "nice" tick step (1, 2 or 5 times a power of ten) giving about
 * `want` intervals over span. */
static double nice_step(double span, int want) {
  if (!(span > 0)) return 1;
  double raw = span / want;
  double mag = pow(10, floor(log10(raw)));
  double r = raw / mag;
  return mag * (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10);
}

/* A number for an axis label: integers plainly, else 3 significant
 * digits. */
static void format_tick(double v, char out[32]) {
  if (fabs(v) >= 1e6 || (v != 0 && fabs(v) < 1e-3))
    snprintf(out, 32, "%.2g", v);
  else if (v == floor(v))
    snprintf(out, 32, "%.0f", v);
  else
    snprintf(out, 32, "%.3g", v);
}

static void svg_open(strbuf *b, const frame *f, const char *cls,
                     const char *label) {
  sb_printf(b,
            "<svg class=\"%s\" xmlns=\"http://www.w3.org/2000/svg\" "
            "viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" height=\"%.0f\" "
            "role=\"img\" aria-label=\"",
            cls, f->width, f->height, f->width, f->height);
  report_escape(b, label);
  sb_puts(b, "\">\n");
}

/* A horizontal grid line at y with its tick label. */
static void y_grid_line(strbuf *b, const frame *f, double y,
                        const char *label) {
  sb_printf(b,
            "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
            "y2=\"%.1f\"/><text x=\"%.1f\" y=\"%.1f\" "
            "text-anchor=\"end\">%s</text>\n",
            f->left, y, f->left + f->w, y, f->left - 6, y + 4, label);
}

/* The y axis: grid lines and labels at nice steps from y0 to y1. */
static void y_axis(strbuf *b, const frame *f, const char *label) {
  double step = nice_step(f->y1 - f->y0, 5);
  sb_puts(b, "<g class=\"axis y\">\n");
  for (double v = f->y0; v <= f->y1 + step * 1e-9; v += step) {
    double y = py(f, v);
    char t[32];
    format_tick(v, t);
    y_grid_line(b, f, y, t);
  }
  sb_printf(b,
            "<text class=\"label\" transform=\"translate(14 %.1f) "
            "rotate(-90)\" text-anchor=\"middle\">",
            f->top + f->h / 2);
  report_escape(b, label);
  sb_puts(b, "</text>\n</g>\n");
}

/* The x axis line, and its label centred under the plot. */
static void x_axis_frame(strbuf *b, const frame *f, const char *label) {
  double y = f->top + f->h;
  sb_printf(b,
            "<line class=\"frame\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
            "y2=\"%.1f\"/>\n<text class=\"label\" x=\"%.1f\" y=\"%.1f\" "
            "text-anchor=\"middle\">",
            f->left, y, f->left + f->w, y, f->left + f->w / 2, f->height - 6);
  report_escape(b, label);
  sb_puts(b, "</text>\n");
}

static void x_tick(strbuf *b, const frame *f, double v, const char *t) {
  double x = px(f, v), y = f->top + f->h;
  sb_printf(b,
            "<line class=\"tick\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
            "y2=\"%.1f\"/><text x=\"%.1f\" y=\"%.1f\" "
            "text-anchor=\"middle\">%s</text>\n",
            x, y, x, y + 4, x, y + 17, t);
}

/* ---- the tuning curve ---- */

/* One vertex of the best-so-far step line. */
typedef struct vertex {
  double x, y;
} vertex;

typedef struct vertices {
  vertex *v;
  size_t n, cap;
  bool failed; /* out of memory: the line is incomplete */
} vertices;

static void add_vertex(vertices *vs, double x, double y) {
  if (vs->failed) return;
  if (vs->n == vs->cap) {
    size_t cap = vs->cap ? vs->cap * 2 : 64;
    vertex *v = ts_realloc(vs->v, cap * sizeof *v);
    if (!v) {
      vs->failed = true;
      return;
    }
    vs->v = v;
    vs->cap = cap;
  }
  vs->v[vs->n++] = (vertex){x, y};
}

static bool better(double a, double b, bool higher_better) {
  return higher_better ? a > b : a < b;
}

/* The running best as a step line through pixel coordinates. An
 * improvement within `min_dx` pixels of the previous one moves that
 * vertex instead of adding two, which bounds the vertex count by the plot
 * width over min_dx. */
static void best_line(const frame *f, const double *values, int64_t n,
                      bool higher_better, double min_dx, vertices *vs) {
  double best = NAN;
  double last_x = -1e300;
  for (int64_t i = 0; i < n; i++) {
    double v = values[i];
    if (!isfinite(v) || (isfinite(best) && !better(v, best, higher_better)))
      continue;
    double x = px(f, (double)i), y = py(f, v);
    if (vs->n && x - last_x < min_dx) {
      vs->v[vs->n - 1].y = y; /* same bucket: the step rises further */
    } else {
      if (vs->n) add_vertex(vs, x, vs->v[vs->n - 1].y);
      add_vertex(vs, x, y);
      last_x = x;
    }
    best = v;
  }
  if (vs->n)
    add_vertex(vs, px(f, (double)(n > 1 ? n - 1 : 1)), vs->v[vs->n - 1].y);
}

void report_svg_curve(strbuf *b, const double *values, int64_t n,
                      bool higher_better, const char *y_label,
                      const report_level *levels, int n_levels,
                      int max_points) {
  if (max_points < 10) max_points = 10;
  frame f = {.width = 720, .height = 300, .left = 64, .top = 14};
  f.w = f.width - f.left - 150; /* room for level labels on the right */
  f.h = f.height - f.top - 46;
  int64_t n_ok = 0, n_failed = 0;
  double vmax = 0;
  for (int64_t i = 0; i < n; i++) {
    if (isfinite(values[i])) {
      n_ok++;
      if (values[i] > vmax) vmax = values[i];
    } else {
      n_failed++;
    }
  }
  for (int i = 0; i < n_levels; i++)
    if (isfinite(levels[i].value) && levels[i].value > vmax)
      vmax = levels[i].value;
  double step = nice_step(vmax > 0 ? vmax * 1.05 : 1, 5);
  f.x0 = 0;
  f.x1 = n > 1 ? (double)(n - 1) : 1;
  f.y0 = 0;
  f.y1 = vmax > 0 ? ceil(vmax * 1.05 / step) * step : 1;
  char label[160];
  snprintf(label, sizeof label,
           "tuning curve: %lld measurements, %lld ok, %lld failed",
           (long long)n, (long long)n_ok, (long long)n_failed);
  svg_open(b, &f, "chart curve", label);
  y_axis(b, &f, y_label);
  x_axis_frame(b, &f, "measurement (commit order)");
  double xstep = nice_step(f.x1, 6);
  if (xstep < 1) xstep = 1;
  sb_puts(b, "<g class=\"axis x\">\n");
  for (double v = 0; v <= f.x1 + 1e-9; v += xstep) {
    char t[32];
    format_tick(v, t);
    x_tick(b, &f, v, t);
  }
  sb_puts(b, "</g>\n");

  /* every measurement: dots, or one min-max bar per bucket */
  if (n_ok && n_ok <= max_points) {
    sb_printf(b, "<g class=\"trials\" data-count=\"%lld\">\n", (long long)n_ok);
    for (int64_t i = 0; i < n; i++)
      if (isfinite(values[i]))
        sb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2\"/>\n",
                  px(&f, (double)i), py(&f, values[i]));
    sb_puts(b, "</g>\n");
  } else if (n_ok) {
    int64_t buckets = max_points / 2;
    sb_printf(b,
              "<path class=\"trial-range\" data-count=\"%lld\" "
              "data-buckets=\"%lld\" d=\"",
              (long long)n_ok, (long long)buckets);
    for (int64_t k = 0; k < buckets; k++) {
      int64_t from = k * n / buckets, to = (k + 1) * n / buckets;
      double lo = INFINITY, hi = -INFINITY;
      for (int64_t i = from; i < to; i++)
        if (isfinite(values[i])) {
          if (values[i] < lo) lo = values[i];
          if (values[i] > hi) hi = values[i];
        }
      if (!isfinite(lo)) continue;
      double x = px(&f, (double)(from + to - 1) / 2);
      double y_hi = py(&f, hi), y_lo = py(&f, lo);
      if (y_lo - y_hi < 1) y_lo = y_hi + 1;
      sb_printf(b, "M%.1f %.1fV%.1f", x, y_hi, y_lo);
    }
    sb_puts(b, "\"/>\n");
  }

  /* failures: ticks under the axis, one per bucket that has any */
  if (n_failed) {
    int64_t buckets = n < max_points ? n : max_points;
    sb_printf(b, "<path class=\"fail\" data-count=\"%lld\" d=\"",
              (long long)n_failed);
    for (int64_t k = 0; k < buckets; k++) {
      int64_t from = k * n / buckets, to = (k + 1) * n / buckets;
      int64_t i = from;
      while (i < to && isfinite(values[i])) i++;
      if (i < to)
        sb_printf(b, "M%.1f %.1fv7", px(&f, (double)i), f.top + f.h + 20);
    }
    sb_printf(b, "\"><title>%lld failed measurements</title></path>\n",
              (long long)n_failed);
  }

  /* vendor levels; labels of close levels moved apart so they stay
   * readable */
  double label_y[16];
  int n_labels = 0;
  for (int i = 0; i < n_levels; i++) {
    if (!isfinite(levels[i].value)) continue;
    double y = py(&f, levels[i].value);
    /* inside the frame (a level far off the curve's scale would give a
     * label position where adding 12 changes nothing) */
    if (!(y >= f.top)) y = f.top;
    if (y > f.top + f.h) y = f.top + f.h;
    double ly = y + 4;
    /* each move lifts the label past another one: at most n_labels */
    for (int pass = 0, moved = 1; moved && pass <= n_labels; pass++) {
      moved = 0;
      for (int k = 0; k < n_labels; k++)
        if (fabs(label_y[k] - ly) < 12) {
          ly = label_y[k] + 12;
          moved = 1;
        }
    }
    if (n_labels < 16) label_y[n_labels++] = ly;
    sb_printf(b,
              "<g class=\"level\"><line x1=\"%.1f\" y1=\"%.1f\" "
              "x2=\"%.1f\" y2=\"%.1f\"/><text x=\"%.1f\" y=\"%.1f\">",
              f.left, y, f.left + f.w, y, f.left + f.w + 6, ly);
    report_escape(b, levels[i].label);
    sb_puts(b, "</text></g>\n");
  }

  /* the running best */
  vertices vs = {0};
  best_line(&f, values, n, higher_better, f.w / max_points, &vs);
  if (vs.failed) sb_fail(b);
  if (vs.n) {
    sb_printf(b, "<polyline class=\"best\" data-count=\"%zu\" points=\"", vs.n);
    for (size_t i = 0; i < vs.n; i++)
      sb_printf(b, "%s%.1f,%.1f", i ? " " : "", vs.v[i].x, vs.v[i].y);
    sb_puts(b, "\"/>\n");
  } else {
    sb_printf(b,
              "<text class=\"empty\" x=\"%.1f\" y=\"%.1f\" "
              "text-anchor=\"middle\">%s</text>\n",
              f.left + f.w / 2, f.top + f.h / 2,
              n ? "no successful measurement" : "no measurements");
  }
  free(vs.v);
  sb_puts(b, "</svg>\n");
}

/* ---- the latency histogram ---- */

/* Ticks of a log10 axis over [lo, hi] (exponents): 1-2-5 per decade when
 * the range is short, decades otherwise. */
static void log_ticks(strbuf *b, const frame *f) {
  double decades = f->x1 - f->x0;
  static const double all[] = {1, 2, 5};
  int per = decades <= 3 ? 3 : 1;
  for (int e = (int)floor(f->x0); e <= (int)ceil(f->x1); e++)
    for (int k = 0; k < per; k++) {
      double v = all[k] * pow(10, e);
      double lv = log10(v);
      if (lv < f->x0 - 1e-9 || lv > f->x1 + 1e-9) continue;
      char t[32];
      report_format_seconds(v, t);
      x_tick(b, f, v, t);
    }
}

static void linear_ticks(strbuf *b, const frame *f) {
  double step = nice_step(f->x1 - f->x0, 5);
  for (double v = ceil(f->x0 / step) * step; v <= f->x1 + step * 1e-9;
       v += step) {
    char t[32];
    report_format_seconds(v, t);
    x_tick(b, f, v, t);
  }
}

void report_svg_histogram(strbuf *b, const double *secs, int64_t n, int bins,
                          const report_level *marks, int n_marks) {
  if (bins < 1) bins = 1;
  frame f = {.width = 720, .height = 240, .left = 64, .top = 14};
  f.w = f.width - f.left - 150;
  f.h = f.height - f.top - 46;
  double lo = INFINITY, hi = -INFINITY;
  int64_t used = 0;
  for (int64_t i = 0; i < n; i++)
    if (isfinite(secs[i]) && secs[i] > 0) {
      used++;
      if (secs[i] < lo) lo = secs[i];
      if (secs[i] > hi) hi = secs[i];
    }
  double fastest = lo;
  for (int i = 0; used && i < n_marks; i++)
    if (isfinite(marks[i].value) && marks[i].value > 0) {
      if (marks[i].value < lo) lo = marks[i].value;
      if (marks[i].value > hi) hi = marks[i].value;
    }
  char label[96];
  snprintf(label, sizeof label, "latency histogram: %lld ok measurements",
           (long long)used);
  if (!used) {
    f.x0 = 0, f.x1 = 1, f.y0 = 0, f.y1 = 1;
    svg_open(b, &f, "chart histogram", label);
    x_axis_frame(b, &f, "median latency");
    sb_printf(b,
              "<text class=\"empty\" x=\"%.1f\" y=\"%.1f\" "
              "text-anchor=\"middle\">no successful measurement</text>\n"
              "</svg>\n",
              f.left + f.w / 2, f.top + f.h / 2);
    return;
  }
  f.x_log = hi / lo > 8;
  if (f.x_log) {
    f.x0 = log10(lo) - 0.02;
    f.x1 = log10(hi) + 0.02;
  } else if (hi > lo) {
    double pad = (hi - lo) * 0.02;
    f.x0 = lo - pad;
    f.x1 = hi + pad;
  } else {
    f.x0 = lo * 0.95;
    f.x1 = hi * 1.05;
  }
  if (used < bins && !f.x_log && hi == lo) bins = 1;
  int64_t *count = ts_calloc((size_t)bins, sizeof *count);
  if (!count) {
    sb_fail(b);
    return;
  }
  int64_t top = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!(isfinite(secs[i]) && secs[i] > 0)) continue;
    double x = f.x_log ? log10(secs[i]) : secs[i];
    int k = (int)((x - f.x0) / (f.x1 - f.x0) * bins);
    if (k < 0) k = 0;
    if (k >= bins) k = bins - 1;
    if (++count[k] > top) top = count[k];
  }
  double step = nice_step((double)top * 1.05, 4);
  if (step < 1) step = 1;
  f.y0 = 0;
  f.y1 = ceil((double)top * 1.05 / step) * step;
  svg_open(b, &f, "chart histogram", label);
  y_axis(b, &f, "measurements");
  x_axis_frame(b, &f,
               f.x_log ? "median latency (log scale)" : "median latency");
  sb_puts(b, "<g class=\"axis x\">\n");
  if (f.x_log)
    log_ticks(b, &f);
  else
    linear_ticks(b, &f);
  sb_puts(b, "</g>\n<g class=\"bars\">\n");
  double bw = f.w / bins;
  for (int k = 0; k < bins; k++) {
    if (!count[k]) continue;
    double e0 = f.x0 + (f.x1 - f.x0) * k / bins;
    double e1 = f.x0 + (f.x1 - f.x0) * (k + 1) / bins;
    if (f.x_log) e0 = pow(10, e0), e1 = pow(10, e1);
    char a[32], c[32];
    report_format_seconds(e0, a);
    report_format_seconds(e1, c);
    double y = py(&f, (double)count[k]);
    sb_printf(b,
              "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
              "height=\"%.1f\"><title>%s – %s: %lld</title></rect>\n",
              f.left + bw * k + 0.5, y, bw > 2 ? bw - 1 : bw, f.top + f.h - y,
              a, c, (long long)count[k]);
  }
  sb_puts(b, "</g>\n");
  free(count);

  /* the fastest measurement and the marks */
  char t[32];
  report_format_seconds(fastest, t);
  double x = px(&f, fastest);
  sb_printf(b,
            "<g class=\"mark best\"><line x1=\"%.1f\" y1=\"%.1f\" "
            "x2=\"%.1f\" y2=\"%.1f\"/><text x=\"%.1f\" y=\"%.1f\">"
            "best %s</text></g>\n",
            x, f.top, x, f.top + f.h, f.left + f.w + 6, f.top + 10, t);
  for (int i = 0; i < n_marks; i++) {
    if (!(isfinite(marks[i].value) && marks[i].value > 0)) continue;
    x = px(&f, marks[i].value);
    sb_printf(b,
              "<g class=\"mark level\"><line x1=\"%.1f\" y1=\"%.1f\" "
              "x2=\"%.1f\" y2=\"%.1f\"/><text x=\"%.1f\" y=\"%.1f\">",
              x, f.top, x, f.top + f.h, f.left + f.w + 6, f.top + 26 + 16 * i);
    report_escape(b, marks[i].label);
    sb_puts(b, "</text></g>\n");
  }
  sb_puts(b, "</svg>\n");
}

/* ---- the roofline ---- */

/* The fixed colours of the roofline's series: tessera first, then one per
 * vendor (report.c gives the vendors their indices). */
static const char *const palette[REPORT_N_COLOURS] = {
    "#0969da", /* tessera */
    "#bc4c00", "#8250df", "#1a7f37", "#cf222e",
    "#9a6700", "#bf3989", "#0a7c86", "#57606a",
};

/* A roof's figure in a label: integers from 100 up, else 3 significant
 * digits. */
static void format_figure(double v, char out[32]) {
  if (v >= 100)
    snprintf(out, 32, "%.0f", v);
  else
    snprintf(out, 32, "%.3g", v);
}

/* Decade grid lines and labels of both log axes; the frame's ranges are
 * exponents (x0..x1, y0..y1). */
static void log_axes(strbuf *b, const frame *f) {
  char t[32];
  sb_puts(b, "<g class=\"axis y\">\n");
  for (int e = (int)ceil(f->y0 - 1e-9); e <= (int)floor(f->y1 + 1e-9); e++) {
    double y = py(f, e);
    format_tick(pow(10, e), t);
    y_grid_line(b, f, y, t);
  }
  sb_printf(b,
            "<text class=\"label\" transform=\"translate(14 %.1f) "
            "rotate(-90)\" text-anchor=\"middle\">GFLOP/s (log scale)"
            "</text>\n</g>\n<g class=\"axis x\">\n",
            f->top + f->h / 2);
  x_axis_frame(b, f, "arithmetic intensity (FLOP/byte, log scale)");
  for (int e = (int)ceil(f->x0 - 1e-9); e <= (int)floor(f->x1 + 1e-9); e++) {
    double x = px(f, e);
    format_tick(pow(10, e), t);
    sb_printf(b,
              "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
              "y2=\"%.1f\"/>",
              x, f->top, x, f->top + f->h);
    x_tick(b, f, e, t);
  }
  sb_puts(b, "</g>\n");
}

/* The exponent ranges of a roofline: every point, every compute roof and
 * each ridge point (where a compute roof meets the widest memory roof),
 * with some room, whole decades, at least two and at most eight of them. */
static void roofline_ranges(frame *f, const report_level *compute,
                            int n_compute, double top, double widest,
                            const report_point *pts, int n_pts) {
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (int i = 0; i < n_pts; i++) {
    xlo = fmin(xlo, pts[i].intensity), xhi = fmax(xhi, pts[i].intensity);
    ylo = fmin(ylo, pts[i].gflops), yhi = fmax(yhi, pts[i].gflops);
  }
  for (int i = 0; i < n_compute; i++) {
    double c = compute[i].value;
    if (!(c > 0)) continue;
    ylo = fmin(ylo, c), yhi = fmax(yhi, c);
    if (widest > 0) xlo = fmin(xlo, c / widest), xhi = fmax(xhi, c / widest);
  }
  if (!isfinite(xlo)) xlo = 0.1, xhi = 10;
  if (!isfinite(ylo)) {
    double base = top > 0 ? top : widest > 0 ? widest : 100;
    ylo = base / 1000, yhi = base;
  }
  f->x0 = floor(log10(xlo) - 0.3), f->x1 = ceil(log10(xhi) + 0.3);
  f->y0 = floor(log10(ylo) - 0.2), f->y1 = ceil(log10(yhi) + 0.2);
  if (f->x1 - f->x0 < 2) f->x1 = f->x0 + 2;
  if (f->y1 - f->y0 < 2) f->y0 = f->y1 - 2;
  if (f->x1 - f->x0 > 8) f->x0 = f->x1 - 8;
  if (f->y1 - f->y0 > 8) f->y0 = f->y1 - 8;
}

/* A y for a label near `want` at least 12 pixels from the labels placed
 * so far (remembered in used[], up to 16). */
static double free_label_y(double want, double *used, int *n_used) {
  for (bool moved = true; moved;) {
    moved = false;
    for (int k = 0; k < *n_used; k++)
      if (fabs(used[k] - want) < 12) {
        want = used[k] + 12;
        moved = true;
      }
  }
  if (*n_used < 16) used[(*n_used)++] = want;
  return want;
}

/* The memory roofs: y = x * GB/s from the left edge (or where the line
 * enters the plot) up to the highest compute roof (or the top), labelled
 * along the line. */
static void memory_roofs(strbuf *b, const frame *f, const report_level *memory,
                         int n_memory, double top) {
  for (int i = 0; i < n_memory; i++) {
    if (!(memory[i].value > 0)) continue;
    double lb = log10(memory[i].value);
    double sx = fmax(f->x0, f->y0 - lb);
    double ex = fmin(f->x1, (top > 0 ? fmin(log10(top), f->y1) : f->y1) - lb);
    if (ex <= sx) continue;
    double x1 = px(f, sx), y1 = py(f, lb + sx);
    double x2 = px(f, ex), y2 = py(f, lb + ex);
    double at = 0.1 + 0.3 * (i % 3);
    double angle = atan2(y2 - y1, x2 - x1) * 57.29577951308232; /* deg */
    char v[32];
    format_figure(memory[i].value, v);
    sb_printf(b,
              "<g class=\"roof memory\"><line x1=\"%.1f\" y1=\"%.1f\" "
              "x2=\"%.1f\" y2=\"%.1f\"/><text transform=\"translate(%.1f "
              "%.1f) rotate(%.1f)\" y=\"-5\">",
              x1, y1, x2, y2, x1 + (x2 - x1) * at, y1 + (y2 - y1) * at, angle);
    report_escape(b, memory[i].label);
    sb_printf(b, " %s GB/s</text></g>\n", v);
  }
}

/* The compute roofs: horizontal from their ridge point with the widest
 * memory roof (or the left edge) to the right edge, labelled at the right
 * end, above the line or, when that place is taken, below it. */
static void compute_roofs(strbuf *b, const frame *f,
                          const report_level *compute, int n_compute,
                          double widest) {
  double used[16];
  int n_used = 0;
  for (int i = 0; i < n_compute; i++) {
    double c = compute[i].value;
    if (!(c > 0)) continue;
    double lc = log10(c);
    double sx = widest > 0 ? fmax(f->x0, lc - log10(widest)) : f->x0;
    double y = py(f, lc);
    double ly = free_label_y(y - 5, used, &n_used);
    char v[32];
    format_figure(c, v);
    sb_printf(b,
              "<g class=\"roof compute\"><line x1=\"%.1f\" y1=\"%.1f\" "
              "x2=\"%.1f\" y2=\"%.1f\"/><text x=\"%.1f\" y=\"%.1f\" "
              "text-anchor=\"end\">",
              px(f, sx), y, f->left + f->w, y, f->left + f->w - 4, ly);
    report_escape(b, compute[i].label);
    sb_printf(b, " %s GFLOP/s</text></g>\n", v);
  }
}

/* The points, vendors first so tessera's stay on top; tessera's are
 * numbered with their section and link to it. */
static void roofline_points(strbuf *b, const frame *f, const report_point *pts,
                            int n_pts, const report_series *series,
                            int n_series) {
  sb_printf(b, "<g class=\"points\" data-count=\"%d\">\n", n_pts);
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < n_pts; i++) {
      const report_point *p = &pts[i];
      int colour = p->series >= 0 && p->series < n_series
                       ? series[p->series].colour % REPORT_N_COLOURS
                       : REPORT_N_COLOURS - 1;
      if ((colour == 0) != (pass == 1)) continue;
      double x =
          fmin(fmax(px(f, log10(p->intensity)), f->left), f->left + f->w);
      double y = fmin(fmax(py(f, log10(p->gflops)), f->top), f->top + f->h);
      if (p->task) sb_printf(b, "<a href=\"#task-%d\">", p->task);
      sb_printf(b,
                "<circle class=\"pt\" data-series=\"%d\" cx=\"%.1f\" "
                "cy=\"%.1f\" r=\"%d\" fill=\"%s\"><title>",
                p->series, x, y, colour == 0 ? 6 : 5, palette[colour]);
      report_escape(b, p->label);
      sb_puts(b, "</title></circle>");
      if (colour == 0 && p->task)
        sb_printf(b,
                  "<text class=\"pt-label\" x=\"%.1f\" y=\"%.1f\">#%d"
                  "</text>",
                  x + 8, y - 6, p->task);
      sb_puts(b, p->task ? "</a>\n" : "\n");
    }
  sb_puts(b, "</g>\n");
}

/* The legend in the right margin: the series that have points, in the
 * order of their colours (tessera first). */
static void roofline_legend(strbuf *b, const frame *f, const report_point *pts,
                            int n_pts, const report_series *series,
                            int n_series) {
  int row = 0;
  sb_puts(b, "<g class=\"legend\">\n");
  for (int k = 0; k < REPORT_N_COLOURS * n_series; k++) {
    int s = k % n_series;
    if (series[s].colour % REPORT_N_COLOURS != k / n_series) continue;
    bool used = false;
    for (int i = 0; i < n_pts && !used; i++) used = pts[i].series == s;
    if (!used) continue;
    double x = f->left + f->w + 18, y = f->top + 12 + 20 * row++;
    sb_printf(b,
              "<g class=\"key\"><circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" "
              "fill=\"%s\"/><text x=\"%.1f\" y=\"%.1f\">",
              x, y, palette[series[s].colour % REPORT_N_COLOURS], x + 10,
              y + 4);
    report_escape(b, series[s].name);
    sb_puts(b, "</text></g>\n");
  }
  sb_puts(b, "</g>\n");
}

void report_svg_roofline(strbuf *b, const report_level *compute, int n_compute,
                         const report_level *memory, int n_memory,
                         const report_point *pts, int n_pts,
                         const report_series *series, int n_series) {
  frame f = {.width = 960, .height = 420, .left = 64, .top = 14};
  f.w = f.width - f.left - 170; /* room for the legend on the right */
  f.h = f.height - f.top - 46;
  double top = -INFINITY, widest = -INFINITY;
  for (int i = 0; i < n_compute; i++)
    if (compute[i].value > 0) top = fmax(top, compute[i].value);
  for (int i = 0; i < n_memory; i++)
    if (memory[i].value > 0) widest = fmax(widest, memory[i].value);
  roofline_ranges(&f, compute, n_compute, top, widest, pts, n_pts);
  char label[160];
  snprintf(label, sizeof label,
           "roofline: %d points, %d compute roofs, %d memory roofs", n_pts,
           n_compute, n_memory);
  svg_open(b, &f, "chart roofline", label);
  log_axes(b, &f);
  memory_roofs(b, &f, memory, n_memory, top);
  compute_roofs(b, &f, compute, n_compute, widest);
  if (n_pts) {
    roofline_points(b, &f, pts, n_pts, series, n_series);
    roofline_legend(b, &f, pts, n_pts, series, n_series);
  } else {
    sb_printf(b,
              "<text class=\"empty\" x=\"%.1f\" y=\"%.1f\" "
              "text-anchor=\"middle\">no successful measurement on this "
              "target</text>\n",
              f.left + f.w / 2, f.top + f.h / 2);
  }
  sb_puts(b, "</svg>\n");
}
