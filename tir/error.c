/*
 * error.c — the ts_error report: recording a message with the position in
 * the input and the place in tessera that raised it.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

int ts_error_setv(ts_error *err, int code, const char *src_file, int src_line,
                  const char *fmt, va_list ap) {
  if (!err) return code;
  err->code = code;
  err->line = 0;
  err->column = 0;
  err->src_file = src_file;
  err->src_line = src_line;
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  return code;
}

int ts_error_set(ts_error *err, int code, const char *src_file, int src_line,
                 const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ts_error_setv(err, code, src_file, src_line, fmt, ap);
  va_end(ap);
  return code;
}

int ts_error_at(ts_error *err, int code, int line, int column,
                const char *src_file, int src_line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ts_error_setv(err, code, src_file, src_line, fmt, ap);
  va_end(ap);
  if (err) {
    err->line = line;
    err->column = column;
  }
  return code;
}

void ts_error_clear(ts_error *err) {
  if (!err) return;
  memset(err, 0, sizeof *err);
}

const char *ts_strerror(int code) {
  switch (code) {
  case TS_OK: return "ok";
  case TS_EINVAL: return "invalid input";
  case TS_ENOMEM: return "out of memory or over a size limit";
  case TS_EPARSE: return "parse error";
  case TS_EIO: return "i/o error";
  case TS_ENOTFOUND: return "not found";
  case TS_EUNSUPPORTED: return "unsupported";
  case TS_ERANGE: return "out of range";
  case TS_EVERIFY: return "ill-formed IR";
  case TS_ESCHEDULE: return "illegal schedule request";
  case TS_EINTERNAL: return "internal error";
  default: return "unknown error";
  }
}
