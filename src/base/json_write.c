/* json_write.c - the growing-buffer JSON writer (see json_write.h). */
#include "base/json_write.h"

#include <math.h>
#include <stdlib.h>

#include "base/json_num.h"

bool vl__jw_grow(vl__jw *w, size_t n) {
  if (w->nomem) return false;
  size_t before = w->buf->len;
  if (vl_buf_extend(w->buf, n) == NULL) {
    w->nomem = true;
    return false;
  }
  w->buf->len = before; /* capacity only */
  return true;
}

/* Bytes that print as themselves inside a JSON string (cJSON's escaping). */
static bool plain(unsigned char c) {
  return c >= 0x20 && c != '"' && c != '\\';
}

static void escape(vl__jw *w, unsigned char c) {
  static const char hex[] = "0123456789abcdef";
  char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15u]};
  switch (c) {
  case '"': VL__JW_LIT(w, "\\\""); return;
  case '\\': VL__JW_LIT(w, "\\\\"); return;
  case '\b': VL__JW_LIT(w, "\\b"); return;
  case '\f': VL__JW_LIT(w, "\\f"); return;
  case '\n': VL__JW_LIT(w, "\\n"); return;
  case '\r': VL__JW_LIT(w, "\\r"); return;
  case '\t': VL__JW_LIT(w, "\\t"); return;
  default: vl__jw_raw(w, e, sizeof e); return;
  }
}

void vl__jw_str(vl__jw *w, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  vl__jw_char(w, '"');
  for (;;) {
    const unsigned char *run = p;
    while (plain(*p)) p++;
    vl__jw_raw(w, (const char *)run, (size_t)(p - run));
    if (*p == '\0') break;
    escape(w, *p++);
  }
  vl__jw_char(w, '"');
}

void vl__jw_int(vl__jw *w, int64_t v) {
  char text[VL__NUM_TEXT_MAX];
  vl__jw_raw(w, text, vl__num_format_int(v, text));
}

void vl__jw_float(vl__jw *w, double v) {
  char text[VL__NUM_TEXT_MAX];
  vl__jw_raw(w, text, vl__num_format_double(v, text));
}

static void number(vl__jw *w, const cJSON *item) {
  double d = item->valuedouble;
  if (item->valuestring != NULL) {
    vl__jw_raw(w, item->valuestring, strlen(item->valuestring));
  } else if (!isfinite(d)) {
    VL__JW_LIT(w, "null");
  } else if (floor(d) == d && fabs(d) <= 9007199254740992.0) {
    vl__jw_int(w, (int64_t)d);
  } else {
    char text[VL__NUM_TEXT_MAX];
    size_t n = vl__num_format_double(d, text);
    vl__jw_raw(w, text, n);
  }
}

void vl__jw_cjson(vl__jw *w, const cJSON *item) {
  switch (item->type & 0xff) {
  case cJSON_False: VL__JW_LIT(w, "false"); return;
  case cJSON_True: VL__JW_LIT(w, "true"); return;
  case cJSON_NULL: VL__JW_LIT(w, "null"); return;
  case cJSON_Number: number(w, item); return;
  case cJSON_String: vl__jw_str(w, item->valuestring ? item->valuestring : ""); return;
  case cJSON_Raw:
    if (item->valuestring) vl__jw_raw(w, item->valuestring, strlen(item->valuestring));
    return;
  case cJSON_Array:
  case cJSON_Object: break;
  default: VL__JW_LIT(w, "null"); return;
  }
  bool object = (item->type & 0xff) == cJSON_Object;
  vl__jw_char(w, object ? '{' : '[');
  for (const cJSON *c = item->child; c != NULL; c = c->next) {
    if (c != item->child) vl__jw_char(w, ',');
    if (object) {
      vl__jw_str(w, c->string ? c->string : "");
      vl__jw_char(w, ':');
    }
    vl__jw_cjson(w, c);
  }
  vl__jw_char(w, object ? '}' : ']');
}

char *vl__jw_finish(vl__jw *w, size_t *len) {
  vl__jw_char(w, '\0');
  if (w->nomem) {
    vl_buf_free(w->buf);
    return NULL;
  }
  char *text = (char *)w->buf->data;
  if (len != NULL) *len = w->buf->len - 1;
  w->buf->data = NULL;
  w->buf->len = w->buf->cap = 0;
  return text;
}

char *vl__json_print(const cJSON *item, size_t *len) {
  vl_buf b = {0};
  vl__jw w = {&b, false};
  vl__jw_cjson(&w, item);
  return vl__jw_finish(&w, len);
}
