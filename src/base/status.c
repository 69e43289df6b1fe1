/* status.c - status texts and codes (generated from VL_STATUS_MAP), the error record and
 * JSON pointer building. */
#include "viewlower/status.h"

#include "base/json_num.h"

#include <stdarg.h>
#include <stdint.h>
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

/* Length of the valid UTF-8 sequence at p (1-4), or 0 (overlong, surrogate, > U+10FFFF,
 * truncated, stray continuation byte). */
static size_t utf8_sequence(const unsigned char *p) {
  if (p[0] < 0x80) return 1;
  size_t n = p[0] >= 0xF0 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC0 ? 2 : 0;
  if (n == 0 || p[0] > 0xF4) return 0;
  uint32_t cp = p[0] & (0x7Fu >> n);
  for (size_t k = 1; k < n; k++) {
    if ((p[k] & 0xC0) != 0x80) return 0; /* also stops at the terminating NUL */
    cp = (cp << 6) | (p[k] & 0x3Fu);
  }
  static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

/* Errors quote hostile input and are cut to fixed buffers, yet they travel in JSON responses
 * and one-line logs: replace bytes that are not UTF-8 (a sequence cut by truncation included)
 * with '?' and control characters with spaces. */
static void sanitize(char *s) {
  unsigned char *p = (unsigned char *)s;
  while (*p) {
    size_t n = utf8_sequence(p);
    if (n == 0) {
      *p++ = '?';
    } else {
      if (n == 1 && (*p < 0x20 || *p == 0x7F)) *p = ' ';
      p += n;
    }
  }
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
  sanitize(err->path);
  sanitize(err->message);
  return code;
}

void vl_error_prefix(vl_error *err, const char *prefix) {
  if (err == NULL || prefix == NULL || prefix[0] == '\0') return;
  char tmp[VL_ERROR_PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s%s", prefix, err->path);
  memcpy(err->path, tmp, sizeof tmp);
  sanitize(err->path); /* the longer path may have been cut inside a character */
}

const char *vl_error_format(const vl_error *err, char *buf, size_t n) {
  if (n == 0) return buf;
  if (err->path[0] != '\0') {
    snprintf(buf, n, "%s: %s", err->path, err->message);
  } else {
    snprintf(buf, n, "%s", err->message[0] ? err->message : vl_status_text(err->code));
  }
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
  vl__num_format_int((int64_t)index, tok); /* no snprintf: the parsers build paths per item */
  vl_pointer_append(buf, n, tok);
}
