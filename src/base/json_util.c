/* json_util.c - strict cJSON helpers: key sets, duplicate keys, exact integers, paths. */
#include "base/json_util.h"

#include "base/json_num.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vl__path_join(char *out, const char *path, const char *token) {
  snprintf(out, VL_ERROR_PATH_MAX, "%s", path);
  vl_pointer_append(out, VL_ERROR_PATH_MAX, token);
}

void vl__path_join_index(char *out, const char *path, size_t index) {
  snprintf(out, VL_ERROR_PATH_MAX, "%s", path);
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
  if (v < (double)min || v > (double)max) return false;
  *out = (int64_t)v;
  return true;
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
      return vl_error_set(err, code, p, "must be a whole number in [%lld, %lld]", (long long)min,
                          (long long)max);
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

/* Offset of the next number token at or after *pos, outside strings (a number is the only
 * token that starts with '-' or a digit); *n its length. */
static size_t next_number(const char *text, size_t len, size_t pos, size_t *n) {
  bool is_float;
  while (pos < len) {
    char c = text[pos];
    if (c == '"') {
      for (pos++; pos < len && text[pos] != '"'; pos++) {
        if (text[pos] == '\\') pos++;
      }
      pos++;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      *n = vl__num_scan(text + pos, len - pos, &is_float);
      return pos;
    } else {
      pos++;
    }
  }
  *n = 0;
  return len;
}

/* Gives every number node of the tree (in document order, as cJSON builds it) its token's
 * text as valuestring, so exact readers and printers see the digits, not the double. */
static bool attach_numbers(cJSON *item, const char *text, size_t len, size_t *pos) {
  for (; item != NULL; item = item->next) {
    if (cJSON_IsNumber(item)) {
      size_t n = 0;
      size_t at = next_number(text, len, *pos, &n);
      if (n == 0 || (item->valuestring = malloc(n + 1)) == NULL) return false;
      memcpy(item->valuestring, text + at, n);
      item->valuestring[n] = '\0';
      *pos = at + n;
    } else if (item->child != NULL && !attach_numbers(item->child, text, len, pos)) {
      return false;
    }
  }
  return true;
}

vl__json_problem vl__json_parse_one(const char *text, size_t len, bool nul_tail_ok, cJSON **doc,
                                    size_t *at) {
  *doc = NULL;
  *at = vl__json_find_nul_escape(text, len);
  if (*at < len) return VL__JSON_NUL_ESCAPE;
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
  size_t value_end = end != NULL && end >= text && end <= text + len ? (size_t)(end - text) : 0;
  if (root == NULL) {
    *at = value_end;
    return VL__JSON_MALFORMED;
  }
  vl__json_problem problem = VL__JSON_OK;
  *at = vl__json_find_control(text, value_end);
  if (*at < value_end) {
    problem = VL__JSON_CONTROL;
  } else {
    *at = value_end;
    while (*at < len &&
           (text[*at] == ' ' || text[*at] == '\t' || text[*at] == '\n' || text[*at] == '\r')) {
      (*at)++;
    }
    if (*at < len && !(nul_tail_ok && text[*at] == '\0')) problem = VL__JSON_TRAILING;
  }
  size_t pos = 0;
  if (problem == VL__JSON_OK && !attach_numbers(root, text, value_end, &pos)) {
    *at = 0;
    problem = VL__JSON_NOMEM;
  }
  if (problem != VL__JSON_OK) {
    cJSON_Delete(root);
    return problem;
  }
  *doc = root;
  return VL__JSON_OK;
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
