/* json_write.h - JSON text written straight into a growing buffer (internal): no tree, no
 * allocation per item, exact numbers.
 *
 * A writer appends to its vl_buf; the first failed growth makes it sticky-failed (nomem) and
 * every later write a no-op, so callers check once at the end. Strings are escaped as cJSON
 * escapes them ('"', '\\', \b \f \n \r \t, other bytes below 0x20 as \u00XX; everything else
 * as is), so text printed here matches cJSON_PrintUnformatted byte for byte. */
#ifndef VIEWLOWER_JSON_WRITE_H
#define VIEWLOWER_JSON_WRITE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "viewlower/buf.h"

typedef struct vl__jw {
  vl_buf *buf;
  bool nomem;
} vl__jw;

/* Makes room for n more bytes; false (and nomem set) when memory runs out. */
bool vl__jw_grow(vl__jw *w, size_t n);

static inline void vl__jw_raw(vl__jw *w, const char *s, size_t n) {
  vl_buf *b = w->buf;
  if (n == 0 || (b->cap - b->len < n && !vl__jw_grow(w, n))) return;
  memcpy(b->data + b->len, s, n);
  b->len += n;
}

static inline void vl__jw_char(vl__jw *w, char c) {
  vl_buf *b = w->buf;
  if (b->cap == b->len && !vl__jw_grow(w, 1)) return;
  b->data[b->len++] = (uint8_t)c;
}

/* A string literal, its length known at compile time. */
#define VL__JW_LIT(w, lit) vl__jw_raw((w), (lit), sizeof(lit) - 1)

/* s (NUL-terminated) as a quoted, escaped JSON string. */
void vl__jw_str(vl__jw *w, const char *s);
/* Integer digits. */
void vl__jw_int(vl__jw *w, int64_t v);
/* A finite double as a float token (shortest round trip, "2.0" not "2"). */
void vl__jw_float(vl__jw *w, double v);
/* A cJSON tree, exactly: numbers parsed by vl__json_parse_one print their own token text;
 * numbers built through the cJSON API print as an integer when whole within +-2^53, else as
 * the shortest round-trip float, non-finite ones as null (as cJSON does); raw nodes verbatim. */
void vl__jw_cjson(vl__jw *w, const cJSON *item);

/* The tree as unformatted JSON text (vl__jw_cjson), NUL-terminated; caller frees with free().
 * *len (may be NULL) gets the length. NULL when out of memory. Use this instead of
 * cJSON_PrintUnformatted wherever a tree may hold exact numbers. */
char *vl__json_print(const cJSON *item, size_t *len);
/* The writer's text as a NUL-terminated malloc'd string (the buffer is handed over and
 * emptied); NULL, with the buffer freed, when the writer failed. */
char *vl__jw_finish(vl__jw *w, size_t *len);

#endif
