/* status.c - status texts and codes (generated from VL_STATUS_MAP), the error record and
 * JSON pointer building. */
#include "viewlower/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
  int rpc;
  const char *kind;
  const char *text;
} status_table[] = {
#define ROW(name, code, kind, text) {code, kind, text},
    VL_STATUS_MAP(ROW)
#undef ROW
};

const char *vl_status_text(vl_status s) {
  return (unsigned)s < VL_STATUS_COUNT ? status_table[s].text : "unknown status";
}

int vl_status_rpc_code(vl_status s) {
  return (unsigned)s < VL_STATUS_COUNT ? status_table[s].rpc : -32603;
}

const char *vl_status_kind(vl_status s) {
  return (unsigned)s < VL_STATUS_COUNT ? status_table[s].kind : "internal";
}

void vl_error_clear(vl_error *err) {
  if (err == NULL) return;
  err->code = VL_OK;
  err->path[0] = '\0';
  err->message[0] = '\0';
}

vl_status vl_error_set(vl_error *err, vl_status code, const char *path, const char *fmt, ...) {
  if (err == NULL) return code;
  err->code = code;
  snprintf(err->path, sizeof err->path, "%s", path ? path : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  /* Messages are one line: a newline from hostile input must not split a log record. */
  for (char *p = err->message; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
  return code;
}

void vl_error_prefix(vl_error *err, const char *prefix) {
  if (err == NULL || prefix == NULL || prefix[0] == '\0') return;
  char tmp[VL_ERROR_PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s%s", prefix, err->path);
  memcpy(err->path, tmp, sizeof tmp);
}

const char *vl_error_format(const vl_error *err, char *buf, size_t n) {
  if (n == 0) return buf;
  if (err->path[0] != '\0')
    snprintf(buf, n, "%s: %s", err->path, err->message);
  else
    snprintf(buf, n, "%s", err->message[0] ? err->message : vl_status_text(err->code));
  return buf;
}

void vl_pointer_append(char *buf, size_t n, const char *token) {
  size_t len = strnlen(buf, n);
  if (len + 1 >= n) return;
  buf[len++] = '/';
  for (const char *p = token; *p && len + 1 < n; p++) {
    /* RFC 6901: '~' is written "~0" and '/' is written "~1". */
    if (*p == '~' || *p == '/') {
      if (len + 2 >= n) break;
      buf[len++] = '~';
      buf[len++] = *p == '~' ? '0' : '1';
    } else {
      buf[len++] = *p;
    }
  }
  buf[len] = '\0';
}

void vl_pointer_append_index(char *buf, size_t n, size_t index) {
  char tok[32];
  snprintf(tok, sizeof tok, "%zu", index);
  vl_pointer_append(buf, n, tok);
}
