/* json_util.h - strict helpers over cJSON shared by the core's parsers (internal).
 * cJSON keeps duplicate keys and saturates valueint: these helpers reject duplicates and read
 * integers from valuedouble, requiring whole numbers within +-2^53. */
#ifndef VIEWLOWER_JSON_UTIL_H
#define VIEWLOWER_JSON_UTIL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "viewlower/status.h"

/* JSON whitespace (RFC 8259: space, tab, LF, CR; cJSON itself skips every byte up to 32, NUL
 * included), and the index of the first byte at or after s[i] that is none (n at the end). */
static inline bool vl__json_is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
static inline size_t vl__json_ws_end(const char *s, size_t n, size_t i) {
  while (i < n && vl__json_is_ws(s[i])) i++;
  return i;
}

#define VL__JSON_INT_MAX 9007199254740992.0 /* 2^53 */

/* Rejects keys of obj not in allowed (NULL-terminated; extra may add more) and duplicate keys.
 * path is the pointer of obj; errors get code. */
vl_status vl__json_check_keys(const cJSON *obj, const char *const *allowed,
                              const char *const *extra, const char *path, vl_status code,
                              vl_error *err);
/* A whole JSON number within [min, max] (and +-2^53). */
bool vl__json_int(const cJSON *item, int64_t min, int64_t max, int64_t *out);
/* "must be a whole number in [min, max]" at path, the range narrowed to +-2^53 (what every
 * reader accepts), so a shape entry of 2^62 is not told that [0, 2^63 - 1] is the range. */
vl_status vl__json_int_range_error(vl_error *err, vl_status code, const char *path, int64_t min,
                                   int64_t max);
/* Reads an array of at most max_len integers in [min, max]; errors name path/index. */
vl_status vl__json_int_array(const cJSON *arr, size_t max_len, int64_t min, int64_t max,
                             int64_t *out, size_t *len, const char *path, vl_status code,
                             vl_error *err);
/* path + "/" + token into out (size VL_ERROR_PATH_MAX). */
void vl__path_join(char *out, const char *path, const char *token);
void vl__path_join_index(char *out, const char *path, size_t index);
/* Offset of the first \u0000 escape in JSON text, or len when there is none. cJSON decodes it
 * to a NUL that ends the C string early ("x\u0000y" would read as "x"), so text parsers refuse
 * such documents before building a tree. */
size_t vl__json_find_nul_escape(const char *text, size_t len);
/* Offset of the first raw control byte JSON does not allow in text[0..len) (one parsed JSON
 * value): any byte below 0x20 inside a string, any but tab, LF and CR between tokens; len when
 * there is none. cJSON takes every such byte for whitespace, or for part of the string. */
size_t vl__json_find_control(const char *text, size_t len);
/* Why vl__json_parse_one refused a text. */
typedef enum {
  VL__JSON_OK,
  VL__JSON_NUL_ESCAPE, /* a \u0000 escape (see vl__json_find_nul_escape) */
  VL__JSON_MALFORMED,  /* not JSON (or nested deeper than CJSON_NESTING_LIMIT) */
  VL__JSON_CONTROL,    /* a raw control byte (see vl__json_find_control) */
  VL__JSON_TRAILING,   /* text other than whitespace after the value */
  VL__JSON_NOMEM,      /* out of memory building the tree */
} vl__json_problem;

/* Parses text[0..len) as exactly one JSON value held to RFC 8259, building the cJSON tree in
 * one pass of its own (cJSON's parser is lenient): numbers follow the grammar exactly (the one
 * vl__num_scan and the streaming reader use: no "00", "01", "2.", "1.e2", "+1", ".5", NaN) and
 * every number node keeps its token's exact text in valuestring (cJSON_Delete frees it; print
 * such trees with vl__json_print, base/json_write.h, to keep the digits); no \u0000 escape and
 * no lone surrogate; no raw control byte JSON forbids; at most CJSON_NESTING_LIMIT nested
 * containers; nothing but space, tab, LF or CR after the value (NUL bytes there too when
 * nul_tail_ok). Every block comes from cJSON's allocator (its hooks), so a daemon counting
 * those counts the tree. On success *doc owns the tree; otherwise *doc is NULL and *at is the
 * byte offset of the problem (a malformed number: its first byte). Callers word the error. */
vl__json_problem vl__json_parse_one(const char *text, size_t len, bool nul_tail_ok, cJSON **doc,
                                    size_t *at);
/* Why a text is malformed at byte at, for error messages (every parser's, so the rules are worded
 * once): an array or object opened past CJSON_NESTING_LIMIT levels, an escape that is none or a
 * surrogate escape without its other half (at its backslash), what is wrong with the number that
 * starts there ("a number may not have a leading zero", ...), or "" for anything else. */
const char *vl__json_malformed_reason(const char *text, size_t len, size_t at);
/* A cJSON raw item holding text (NUL-terminated, one JSON value), without a copy. take: the item
 * owns text (malloc'd; cJSON_Delete frees it), and text is freed when the item cannot be made.
 * borrow: the item only points at text (a reference: cJSON_Delete leaves it), which must
 * outlive it. NULL when out of memory. */
cJSON *vl__json_raw_take(char *text);
cJSON *vl__json_raw_borrow(const char *text);
/* Does the string hold valid UTF-8 and no NUL before len? */
bool vl__utf8_valid(const char *s, size_t len);

#endif
