/* json_num.c - exact JSON numbers: token grammar, exact int64 reading, nearest-double reading,
 * integer and shortest round-trip float printing (see json_num.h). */
#include "base/json_num.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

size_t vl__num_scan(const char *s, size_t len, bool *is_float) {
  size_t i = 0;
  *is_float = false;
  if (i < len && s[i] == '-') i++;
  if (i >= len || !is_digit(s[i])) return 0;
  if (s[i] == '0') {
    i++;
  } else {
    while (i < len && is_digit(s[i])) i++;
  }
  if (i < len && s[i] == '.') {
    if (i + 1 >= len || !is_digit(s[i + 1])) return 0;
    i++;
    while (i < len && is_digit(s[i])) i++;
    *is_float = true;
  }
  if (i < len && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < len && (s[i] == '+' || s[i] == '-')) i++;
    if (i >= len || !is_digit(s[i])) return 0;
    while (i < len && is_digit(s[i])) i++;
    *is_float = true;
  }
  return i;
}

/* An integer token (grammar already checked) within int64, digit by digit. */
static bool parse_int(const char *s, size_t len, int64_t *out) {
  bool neg = s[0] == '-';
  uint64_t limit = neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
  uint64_t acc = 0;
  for (size_t i = neg; i < len; i++) {
    uint64_t d = (uint64_t)(s[i] - '0');
    if (acc > (limit - d) / 10u) return false;
    acc = acc * 10u + d;
  }
  if (!neg) {
    *out = (int64_t)acc;
  } else {
    *out = acc == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)acc;
  }
  return true;
}

/* strtod wants a NUL-terminated string: short tokens are copied to the stack. */
static bool parse_float(const char *s, size_t len, double *out) {
  char small[128];
  char *text = len < sizeof small ? small : malloc(len + 1);
  if (text == NULL) return false;
  memcpy(text, s, len);
  text[len] = '\0';
  errno = 0;
  double v = strtod(text, NULL);
  bool overflow = errno == ERANGE && isinf(v);
  if (text != small) free(text);
  if (overflow) return false;
  *out = v;
  return true;
}

vl__num_result vl__num_parse(const char *s, size_t len, bool *is_float, int64_t *i, double *f) {
  if (vl__num_scan(s, len, is_float) != len || len == 0) return VL__NUM_BAD;
  bool ok = *is_float ? parse_float(s, len, f) : parse_int(s, len, i);
  return ok ? VL__NUM_OK : VL__NUM_RANGE;
}

size_t vl__num_format_int(int64_t v, char *out) {
  char tmp[24];
  size_t n = 0, k = 0;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    tmp[n++] = (char)('0' + u % 10u);
    u /= 10u;
  } while (u != 0);
  if (v < 0) out[k++] = '-';
  while (n > 0) out[k++] = tmp[--n];
  out[k] = '\0';
  return k;
}

/* The shortest "%.*e" text of v (1 .. max_digits significant digits) that reads back to elem.
 * max_digits always reads back (17 digits identify any double; 9 any float). Rounding to more
 * digits never moves further from v, so reading back is monotone in the digit count and a
 * binary search finds the fewest digits in about four tries. */
static void shortest_e(double v, int max_digits, vl__reads_back_fn reads_back, const void *elem,
                       char *text, size_t n) {
  int lo = 1, hi = max_digits;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    snprintf(text, n, "%.*e", mid - 1, v);
    if (reads_back(text, elem)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  snprintf(text, n, "%.*e", hi - 1, v);
}

static void put_chars(char **o, char c, size_t count) {
  for (size_t i = 0; i < count; i++) *(*o)++ = c;
}

static void put_text(char **o, const char *s, size_t len) {
  memcpy(*o, s, len);
  *o += len;
}

/* Rewrites "-d.ddde+x" (same decimal value) as Python's repr would: plain notation when
 * -4 <= x < 16 ("10", "0.0001", "16777216"), else "d.ddde+xx". out has VL__NUM_TEXT_MAX bytes. */
static size_t decimal_from_e(const char *e_text, char *out) {
  char digits[VL__NUM_TEXT_MAX];
  size_t k = 0;
  const char *p = e_text + (*e_text == '-');
  for (; *p != 'e'; p++) {
    if (*p != '.') digits[k++] = *p;
  }
  while (k > 1 && digits[k - 1] == '0') k--;
  int x = (int)strtol(p + 1, NULL, 10);
  char *o = out;
  if (*e_text == '-') *o++ = '-';
  if (x >= 16 || x < -4) {
    put_text(&o, digits, 1);
    if (k > 1) {
      put_chars(&o, '.', 1);
      put_text(&o, digits + 1, k - 1);
    }
    int w = snprintf(o, VL__NUM_TEXT_MAX - (size_t)(o - out), "e%c%02d", x < 0 ? '-' : '+', abs(x));
    return (size_t)(o - out) + (size_t)(w > 0 ? w : 0);
  }
  if (x < 0) {
    put_text(&o, "0.", 2);
    put_chars(&o, '0', (size_t)(-x - 1));
    put_text(&o, digits, k);
  } else if ((size_t)x + 1 >= k) {
    put_text(&o, digits, k);
    put_chars(&o, '0', (size_t)x + 1 - k);
  } else {
    put_text(&o, digits, (size_t)x + 1);
    put_chars(&o, '.', 1);
    put_text(&o, digits + x + 1, k - (size_t)x - 1);
  }
  *o = '\0';
  return (size_t)(o - out);
}

size_t vl__num_format_shortest(double v, int max_digits, vl__reads_back_fn reads_back,
                               const void *elem, char *out) {
  char e_text[VL__NUM_TEXT_MAX];
  /* "-0" is a valid JSON number, but readers that take it for the integer 0 (Python's json)
   * drop the sign; "-0.0" is read as a float everywhere. */
  if (v == 0 && signbit(v)) {
    memcpy(out, "-0.0", 5);
    return 4;
  }
  shortest_e(v, max_digits, reads_back, elem, e_text, sizeof e_text);
  return decimal_from_e(e_text, out);
}

static bool f64_reads_back(const char *text, const void *elem) {
  double d = strtod(text, NULL);
  return memcmp(&d, elem, sizeof d) == 0;
}

size_t vl__num_format_double(double v, char *out) {
  size_t n = vl__num_format_shortest(v, 17, f64_reads_back, &v, out);
  if (memchr(out, '.', n) == NULL && memchr(out, 'e', n) == NULL) {
    memcpy(out + n, ".0", 3);
    n += 2;
  }
  return n;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

long vl__json_hex4(const char *s, size_t len, size_t at) {
  if (at > len || len - at < 4) return -1;
  long v = 0;
  for (size_t k = 0; k < 4; k++) {
    int h = hex_value(s[at + k]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

size_t vl__utf8_encode(uint32_t cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}
