/* json_util.c - strict cJSON helpers: key sets, duplicate keys, exact integers, paths. */
#include "base/json_util.h"

#include "base/json_num.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* path into out, cut to VL_ERROR_PATH_MAX - 1 bytes as snprintf cuts it (without snprintf: the
 * graph parser joins a path for every key it reads, 1.3% of a small lowering's parse). */
static void path_copy(char *out, const char *path) {
  size_t n = strnlen(path, VL_ERROR_PATH_MAX - 1);
  memcpy(out, path, n);
  out[n] = '\0';
}

void vl__path_join(char *out, const char *path, const char *token) {
  path_copy(out, path);
  vl_pointer_append(out, VL_ERROR_PATH_MAX, token);
}

void vl__path_join_index(char *out, const char *path, size_t index) {
  path_copy(out, path);
  vl_pointer_append_index(out, VL_ERROR_PATH_MAX, index);
}

static bool key_in(const char *key, const char *const *list) {
  for (; list != NULL && *list != NULL; list++) {
    if (strcmp(key, *list) == 0) return true;
  }
  return false;
}

vl_status vl__json_check_keys(const cJSON *obj, const char *const *allowed,
                              const char *const *extra, const char *path, vl_status code,
                              vl_error *err) {
  char p[VL_ERROR_PATH_MAX];
  for (const cJSON *c = obj->child; c != NULL; c = c->next) {
    vl__path_join(p, path, c->string);
    if (!key_in(c->string, allowed) && !key_in(c->string, extra)) {
      return vl_error_set(err, code, p, "unknown key \"%.64s\"", c->string);
    }
    /* Objects here have a handful of keys, so the quadratic scan is bounded. */
    for (const cJSON *d = obj->child; d != c; d = d->next) {
      if (strcmp(d->string, c->string) == 0) {
        return vl_error_set(err, code, p, "duplicate key \"%.64s\"", c->string);
      }
    }
  }
  return VL_OK;
}

bool vl__json_int(const cJSON *item, int64_t min, int64_t max, int64_t *out) {
  if (!cJSON_IsNumber(item)) return false;
  double v = item->valuedouble;
  if (!isfinite(v) || floor(v) != v || fabs(v) > VL__JSON_INT_MAX) return false;
  /* An integer token past 2^53 reads as a double within it (9007199254740993 as 2^53): the
   * parsed tree keeps the token's text, so its digits decide. */
  const char *text = item->valuestring;
  if (fabs(v) == VL__JSON_INT_MAX && text != NULL && strpbrk(text, ".eE") == NULL) {
    char *end;
    errno = 0;
    long long exact = strtoll(text, &end, 10);
    if (errno != 0 || *end != '\0' || llabs(exact) != (INT64_C(1) << 53)) return false;
  }
  if (v < (double)min || v > (double)max) return false;
  *out = (int64_t)v;
  return true;
}

vl_status vl__json_int_range_error(vl_error *err, vl_status code, const char *path, int64_t min,
                                   int64_t max) {
  const int64_t bound = (int64_t)VL__JSON_INT_MAX;
  return vl_error_set(err, code, path, "must be a whole number in [%lld, %lld]",
                      (long long)(min < -bound ? -bound : min),
                      (long long)(max > bound ? bound : max));
}

vl_status vl__json_int_array(const cJSON *arr, size_t max_len, int64_t min, int64_t max,
                             int64_t *out, size_t *len, const char *path, vl_status code,
                             vl_error *err) {
  if (!cJSON_IsArray(arr)) return vl_error_set(err, code, path, "must be an array of integers");
  size_t n = 0;
  char p[VL_ERROR_PATH_MAX];
  for (const cJSON *c = arr->child; c != NULL; c = c->next, n++) {
    if (n >= max_len) return vl_error_set(err, code, path, "has more than %zu entries", max_len);
    if (!vl__json_int(c, min, max, &out[n])) {
      vl__path_join_index(p, path, n);
      if (cJSON_IsNumber(c) && c->valuedouble < (double)min && min == 0) {
        return vl_error_set(err, code, p, "must not be negative");
      }
      return vl__json_int_range_error(err, code, p, min, max);
    }
  }
  *len = n;
  return VL_OK;
}

bool vl__utf8_valid(const char *s, size_t len) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  while (i < len) {
    unsigned char c = p[i];
    size_t n;
    uint32_t cp;
    if (c == 0) return false;
    if (c < 0x80) {
      i++;
      continue;
    }
    if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1Fu;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0Fu;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07u;
    } else {
      return false;
    }
    for (size_t k = 1; k <= n; k++) {
      if (i + k >= len || (p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3Fu);
    }
    /* Overlong forms, surrogates and values past U+10FFFF are invalid. */
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

size_t vl__json_find_control(const char *text, size_t len) {
  bool in_string = false;
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)text[i];
    if (in_string) {
      if (ch == '\\') {
        i++; /* the escaped character; an escaped control byte is refused by the parser */
      } else if (ch == '"') {
        in_string = false;
      } else if (ch < 0x20) {
        return i;
      }
    } else if (ch == '"') {
      in_string = true;
    } else if (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') {
      return i;
    }
  }
  return len;
}

/* ---- the strict tree parser ------------------------------------------------------------ */

/* One pass over the text builds the cJSON tree itself, held to RFC 8259: the number grammar is
 * vl__num_scan's (the streaming reader's), so "00", "01", "2.", "1.e2", "+1", ".5" are refused
 * where cJSON would take them (and its numbers would then be re-paired with the wrong tokens);
 * every number keeps its token's text. Strings are decoded once, escapes and surrogate pairs
 * included, into blocks from cJSON's allocator (cJSON_Delete frees them). Nesting is limited to
 * CJSON_NESTING_LIMIT containers, as cJSON and the streaming reader do. */
typedef struct tree_parser {
  const char *t;
  size_t n, pos;
  int depth;
  vl__json_problem problem;
  size_t at;
} tree_parser;

static cJSON *tp_fail(tree_parser *p, vl__json_problem what, size_t at) {
  if (p->problem == VL__JSON_OK) {
    p->problem = what;
    p->at = at;
  }
  return NULL;
}

static bool tp_ws(tree_parser *p) {
  p->pos = vl__json_ws_end(p->t, p->n, p->pos);
  if (p->pos < p->n && (unsigned char)p->t[p->pos] < 0x20) {
    tp_fail(p, VL__JSON_CONTROL, p->pos);
    return false;
  }
  return true;
}

/* The string whose opening quote is at p->pos, decoded into a new block (NUL-terminated). A
 * decoded string is never longer than its text, so one block of the text's length is enough. */
static char *tp_string(tree_parser *p) {
  size_t start = ++p->pos, end = start;
  const unsigned char *t = (const unsigned char *)p->t;
  bool escaped = false;
  while (end < p->n && t[end] != '"') {
    if (t[end] < 0x20) return tp_fail(p, VL__JSON_CONTROL, end), NULL;
    if (t[end] == '\\') {
      escaped = true;
      end++;
    }
    end++;
  }
  if (end >= p->n) return tp_fail(p, VL__JSON_MALFORMED, p->n), NULL;
  char *out = cJSON_malloc(end - start + 1);
  if (out == NULL) return tp_fail(p, VL__JSON_NOMEM, start), NULL;
  if (!escaped) {
    memcpy(out, p->t + start, end - start);
    out[end - start] = '\0';
    p->pos = end + 1;
    return out;
  }
  size_t o = 0;
  for (size_t i = start; i < end;) {
    if (t[i] != '\\') {
      out[o++] = (char)t[i++];
      continue;
    }
    char c = p->t[i + 1];
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *k = c != '\0' ? strchr(from, c) : NULL;
    if (k != NULL) {
      out[o++] = to[k - from];
      i += 2;
      continue;
    }
    int cp = c == 'u' ? (int)vl__json_hex4(p->t, p->n, i + 2) : -1;
    if (cp < 0) {
      cJSON_free(out);
      return tp_fail(p, VL__JSON_MALFORMED, i), NULL;
    }
    if (cp == 0) {
      cJSON_free(out);
      return tp_fail(p, VL__JSON_NUL_ESCAPE, i), NULL;
    }
    uint32_t code = (uint32_t)cp;
    size_t next = i + 6;
    if (cp >= 0xDC00 && cp <= 0xDFFF) {
      cJSON_free(out);
      return tp_fail(p, VL__JSON_MALFORMED, i), NULL; /* a lone low surrogate */
    }
    if (cp >= 0xD800 && cp <= 0xDBFF) { /* a high surrogate needs its low half next */
      int lo = next + 1 < end && p->t[next] == '\\' && p->t[next + 1] == 'u'
                   ? (int)vl__json_hex4(p->t, p->n, next + 2)
                   : -1;
      if (lo < 0xDC00 || lo > 0xDFFF) {
        cJSON_free(out);
        return tp_fail(p, VL__JSON_MALFORMED, i), NULL;
      }
      code = 0x10000u + (((uint32_t)cp - 0xD800u) << 10) + ((uint32_t)lo - 0xDC00u);
      next += 6;
    }
    o += vl__utf8_encode(code, out + o); /* 1-4 bytes for 6 or 12 of text */
    i = next;
  }
  out[o] = '\0';
  p->pos = end + 1;
  return out;
}

static cJSON *tp_number(tree_parser *p) {
  bool is_float;
  size_t at = p->pos, len = vl__num_scan(p->t + at, p->n - at, &is_float);
  char next = at + len < p->n ? p->t[at + len] : ' ';
  /* a token the grammar cut short ("01", "1.5.2", "2.", "1.e2") is one malformed number */
  if (len == 0 || (next >= '0' && next <= '9') || next == '.' || next == 'e' || next == 'E' ||
      next == '+' || next == '-') {
    return tp_fail(p, VL__JSON_MALFORMED, at);
  }
  char *text = cJSON_malloc(len + 1);
  if (text == NULL) return tp_fail(p, VL__JSON_NOMEM, at);
  memcpy(text, p->t + at, len);
  text[len] = '\0';
  cJSON *item = cJSON_CreateNumber(strtod(text, NULL));
  if (item == NULL) {
    cJSON_free(text);
    return tp_fail(p, VL__JSON_NOMEM, at);
  }
  item->valuestring = text;
  p->pos = at + len;
  return item;
}

static cJSON *tp_word(tree_parser *p, const char *word, cJSON *(*make)(void)) {
  size_t len = strlen(word);
  if (p->n - p->pos < len || memcmp(p->t + p->pos, word, len) != 0) {
    return tp_fail(p, VL__JSON_MALFORMED, p->pos);
  }
  cJSON *item = make();
  if (item == NULL) return tp_fail(p, VL__JSON_NOMEM, p->pos);
  p->pos += len;
  return item;
}

static cJSON *make_true(void) {
  return cJSON_CreateTrue();
}
static cJSON *make_false(void) {
  return cJSON_CreateFalse();
}

static cJSON *tp_value(tree_parser *p);

/* Appends item to the container (cJSON's convention: the first child's prev is the last). */
static void tp_append(cJSON *container, cJSON **tail, cJSON *item) {
  if (container->child == NULL) {
    container->child = item;
  } else {
    (*tail)->next = item;
    item->prev = *tail;
  }
  container->child->prev = item;
  *tail = item;
}

static cJSON *tp_container(tree_parser *p, bool object) {
  if (p->depth >= CJSON_NESTING_LIMIT) return tp_fail(p, VL__JSON_MALFORMED, p->pos);
  cJSON *c = object ? cJSON_CreateObject() : cJSON_CreateArray();
  if (c == NULL) return tp_fail(p, VL__JSON_NOMEM, p->pos);
  p->depth++;
  p->pos++;
  char close = object ? '}' : ']';
  cJSON *tail = NULL;
  for (bool first = true;; first = false) {
    if (!tp_ws(p)) break;
    if (p->pos < p->n && p->t[p->pos] == close && first) {
      p->pos++;
      p->depth--;
      return c;
    }
    if (!first) {
      if (p->pos < p->n && p->t[p->pos] == close) {
        p->pos++;
        p->depth--;
        return c;
      }
      if (p->pos >= p->n || p->t[p->pos] != ',') {
        tp_fail(p, VL__JSON_MALFORMED, p->pos);
        break;
      }
      p->pos++;
      if (!tp_ws(p)) break;
    }
    char *key = NULL;
    if (object) {
      if (p->pos >= p->n || p->t[p->pos] != '"') {
        tp_fail(p, VL__JSON_MALFORMED, p->pos);
        break;
      }
      key = tp_string(p);
      if (key == NULL || !tp_ws(p) || p->pos >= p->n || p->t[p->pos] != ':') {
        cJSON_free(key);
        tp_fail(p, VL__JSON_MALFORMED, p->pos);
        break;
      }
      p->pos++;
    }
    cJSON *item = tp_value(p);
    if (item == NULL) {
      cJSON_free(key);
      break;
    }
    item->string = key;
    tp_append(c, &tail, item);
  }
  cJSON_Delete(c);
  return NULL;
}

static cJSON *tp_value(tree_parser *p) {
  if (!tp_ws(p)) return NULL;
  if (p->pos >= p->n) return tp_fail(p, VL__JSON_MALFORMED, p->pos);
  switch (p->t[p->pos]) {
  case '{': return tp_container(p, true);
  case '[': return tp_container(p, false);
  case '"': {
    size_t at = p->pos;
    char *s = tp_string(p);
    cJSON *item = s != NULL ? cJSON_CreateNull() : NULL;
    if (item == NULL) {
      cJSON_free(s);
      return s != NULL ? tp_fail(p, VL__JSON_NOMEM, at) : NULL;
    }
    item->type = cJSON_String;
    item->valuestring = s;
    return item;
  }
  case 't': return tp_word(p, "true", make_true);
  case 'f': return tp_word(p, "false", make_false);
  case 'n': return tp_word(p, "null", cJSON_CreateNull);
  default: return tp_number(p);
  }
}

/* How many arrays and objects are open just before byte at (brackets in strings not counted). */
static size_t open_containers(const char *text, size_t at) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < at; i++) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        i++;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      depth++;
    } else if ((c == ']' || c == '}') && depth > 0) {
      depth--;
    }
  }
  return depth;
}

#define VL__STR(x) #x
#define VL__XSTR(x) VL__STR(x)

/* Why the escape at s (a backslash, n bytes left) is refused. */
static const char *escape_reason(const char *s, size_t n) {
  if (n < 2 || s[1] != 'u') {
    return "a backslash starts one of the escapes \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX";
  }
  long cp = vl__json_hex4(s, n, 2);
  if (cp < 0) return "\\u must be followed by four hexadecimal digits";
  if (cp >= 0xDC00 && cp <= 0xDFFF) {
    return "a lone low surrogate: \\uDC00-\\uDFFF must follow a high surrogate";
  }
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    return "a lone high surrogate: \\uD800-\\uDBFF must be followed by the escape of a low one "
           "(\\uDC00-\\uDFFF)";
  }
  return "";
}

const char *vl__json_malformed_reason(const char *text, size_t len, size_t at) {
  if (at >= len) return at > 0 ? "the text ends inside a value" : "empty text";
  const char *s = text + at;
  size_t n = len - at, i = 0;
  if ((s[0] == '[' || s[0] == '{') && open_containers(text, at) >= CJSON_NESTING_LIMIT) {
    return "arrays and objects nest deeper than " VL__XSTR(CJSON_NESTING_LIMIT) " levels";
  }
  if (s[0] == '\\') return escape_reason(s, n);
  if (s[0] == '+') return "a number may not start with '+'";
  if (s[0] == '.') return "a number may not start with '.'";
  if ((n >= 3 && memcmp(s, "NaN", 3) == 0) || (n >= 8 && memcmp(s, "Infinity", 8) == 0) ||
      (n >= 9 && memcmp(s, "-Infinity", 9) == 0)) {
    return "NaN and Infinity are not JSON numbers";
  }
  if (s[0] != '-' && !(s[0] >= '0' && s[0] <= '9')) return "";
  if (s[0] == '-') i++;
  if (i >= n || !(s[i] >= '0' && s[i] <= '9')) return "'-' must be followed by a digit";
  if (s[i] == '0' && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '9') {
    return "a number may not have a leading zero";
  }
  while (i < n && s[i] >= '0' && s[i] <= '9') i++;
  if (i < n && s[i] == '.') {
    if (i + 1 >= n || !(s[i + 1] >= '0' && s[i + 1] <= '9')) {
      return "a digit must follow the decimal point";
    }
    for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
    }
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    if (i >= n || !(s[i] >= '0' && s[i] <= '9')) return "a digit must follow the exponent";
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
  }
  return "a malformed number (RFC 8259: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?)";
}

vl__json_problem vl__json_parse_one(const char *text, size_t len, bool nul_tail_ok, cJSON **doc,
                                    size_t *at) {
  tree_parser p = {.t = text, .n = len};
  *doc = NULL;
  *at = 0;
  cJSON *root = tp_value(&p);
  p.pos = vl__json_ws_end(text, len, p.pos);
  if (root != NULL && p.pos < len && !(nul_tail_ok && text[p.pos] == '\0')) {
    /* any other byte after the value, control or not; a \u0000 there is named as such */
    size_t nul = vl__json_find_nul_escape(text + p.pos, len - p.pos);
    tp_fail(&p, nul < len - p.pos ? VL__JSON_NUL_ESCAPE : VL__JSON_TRAILING,
            nul < len - p.pos ? p.pos + nul : p.pos);
  }
  if (root != NULL && nul_tail_ok) {
    for (size_t i = p.pos; i < len && p.problem == VL__JSON_OK; i++) {
      if (text[i] != '\0') tp_fail(&p, VL__JSON_TRAILING, i);
    }
  }
  if (p.problem != VL__JSON_OK) {
    cJSON_Delete(root);
    *at = p.at;
    return p.problem;
  }
  *doc = root;
  *at = p.pos;
  return VL__JSON_OK;
}

/* A raw item whose string is text, in place of the copy cJSON_CreateRaw makes. */
static cJSON *raw_item(char *text) {
  cJSON *raw = cJSON_CreateRaw("");
  if (raw == NULL) return NULL;
  cJSON_free(raw->valuestring);
  raw->valuestring = text;
  return raw;
}

cJSON *vl__json_raw_take(char *text) {
  cJSON *raw = text != NULL ? raw_item(text) : NULL;
  if (raw == NULL) free(text);
  return raw;
}

cJSON *vl__json_raw_borrow(const char *text) {
  cJSON *raw = raw_item((char *)(uintptr_t)text); /* never written: a reference is not freed */
  if (raw != NULL) raw->type |= cJSON_IsReference;
  return raw;
}

size_t vl__json_find_nul_escape(const char *text, size_t len) {
  /* Escapes only occur inside strings; a backslash escapes the next character, so "\\u0000"
   * (an escaped backslash, then "u0000") is text, not a NUL. */
  for (size_t i = 0; i < len; i++) {
    if (text[i] != '\\' || i + 1 >= len) continue;
    if (text[i + 1] == 'u' && i + 5 < len && memcmp(text + i + 2, "0000", 4) == 0) return i;
    i++;
  }
  return len;
}
