/*
 * task_set.c — a set of tasks a pass built on the side (its candidates,
 * each built alone), owning copies of their functions, names and vendor
 * descriptions, so that `tune --model` can measure them after the graphs
 * that built them are gone. PET and the block pass keep one each.
 */
#include "internal.h"

#include "codegen/codegen.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gr_task_set_clear(gr_task_set *s) {
  for (int i = 0; i < s->n; i++) {
    ts_func_free((ts_func *)s->tasks[i].func);
    free((char *)s->tasks[i].first_node);
    free((char *)s->tasks[i].vendor);
  }
  s->n = 0;
}

void gr_task_set_free(gr_task_set *s) {
  gr_task_set_clear(s);
  free(s->tasks);
  s->tasks = NULL;
  s->cap = 0;
}

int gr_task_set_add(gr_task_set *s, const ts_graph_task *t, const char *name) {
  for (int i = 0; i < s->n; i++)
    if (ts_hash128_eq(s->tasks[i].hash, t->hash)) {
      s->tasks[i].count += t->count;
      return TS_OK;
    }
  if (s->n == s->cap) {
    int cap = s->cap ? s->cap * 2 : 16;
    ts_graph_task *a = ts_realloc(s->tasks, sizeof *a * (size_t)cap);
    if (!a) return TS_ENOMEM;
    s->tasks = a;
    s->cap = cap;
  }
  ts_func *f = ts_func_copy(t->func);
  char *nm = ts_strdup(name);
  char *vd = t->vendor ? ts_strdup(t->vendor) : NULL;
  if (!f || !nm || (t->vendor && !vd)) {
    ts_func_free(f);
    free(nm);
    free(vd);
    return TS_ENOMEM;
  }
  ts_graph_task *x = &s->tasks[s->n++];
  *x = *t;
  x->func = f;
  x->first_node = nm;
  x->vendor = vd; /* so that tune measures the vendor call too */
  return TS_OK;
}

void gr_log_vappend(char **log, size_t *len, size_t *cap, const char *fmt,
                    va_list ap) {
  char line[600];
  int n = vsnprintf(line, sizeof line, fmt, ap);
  if (n < 0) return;
  if ((size_t)n >= sizeof line) n = sizeof line - 1;
  if (*len + (size_t)n + 2 > *cap) {
    size_t c = (*cap ? 2 * *cap : 1024) + (size_t)n;
    char *p = ts_realloc(*log, c);
    if (!p) return; /* the line is dropped: the log is for people */
    *log = p;
    *cap = c;
  }
  memcpy(*log + *len, line, (size_t)n);
  *len += (size_t)n;
  (*log)[(*len)++] = '\n';
  (*log)[*len] = 0;
}

int gr_canonical_target(const char *target, char **out, ts_error *err) {
  *out = NULL;
  ts_target *t = NULL;
  int rc = ts_target_parse(target ? target : "llvm", &t, err);
  if (rc) return rc;
  *out = ts_strdup(ts_target_str(t));
  ts_target_free(t);
  return *out ? TS_OK : TS_ERR(err, TS_ENOMEM, "out of memory");
}
