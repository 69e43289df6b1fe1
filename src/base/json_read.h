/* json_read.h - a strict JSON reader over text (internal), for documents too large for a tree.
 *
 * The caller walks the outer structure itself (vl__jr_open / vl__jr_next / vl__jr_key) and has
 * each inner value read into a tape: a flat array of tokens, one per value, reused from value
 * to value, so memory stays bounded by the largest value (one graph node), not the document.
 * Strings on the tape point into the text, or into the reader's arena when they had escapes;
 * numbers keep their token text, so readers can take integers exactly (json_num.h).
 *
 * Held to RFC 8259 as vl__json_parse_one is: whitespace is space, tab, LF and CR only; a raw
 * byte below 0x20 anywhere is a control-character problem; \u0000 is refused (strings are
 * NUL-free); lone surrogates are malformed; numbers follow the grammar exactly; containers nest
 * at most CJSON_NESTING_LIMIT deep. The first problem stops the reader: r->problem and r->at
 * (its byte offset) say what and where; every later call fails. */
#ifndef VIEWLOWER_JSON_READ_H
#define VIEWLOWER_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/json_util.h"

typedef enum {
  VL__JT_NULL,
  VL__JT_FALSE,
  VL__JT_TRUE,
  VL__JT_NUMBER,
  VL__JT_STRING,
  VL__JT_ARRAY,
  VL__JT_OBJECT,
} vl__jt_type;

#define VL__JT_NONE UINT32_MAX

/* One value on the tape. A container's members follow it; an object's members are pairs of a
 * key (a string entry) and its value. next is the index just past this value's subtree. */
typedef struct vl__jt {
  size_t off;   /* string or number: offset of its bytes in the text, or in the arena */
  uint32_t len; /* string or number: byte length; array: items; object: pairs */
  uint32_t next;
  uint8_t type; /* vl__jt_type */
  bool arena;   /* the string's bytes are in the arena (it had escapes) */
} vl__jt;

typedef struct vl__jr {
  const char *text;
  size_t len, pos;
  int depth, max_depth;     /* max_depth: CJSON_NESTING_LIMIT unless the caller sets it */
  vl__json_problem problem; /* VL__JSON_OK while reading goes well */
  size_t at;                /* offset of the problem */
  vl__jt *tape;
  uint32_t n, cap;
  char *arena;
  size_t arena_len, arena_cap;
  bool checking; /* vl__jr_check_value: values go through one tape entry, strings nowhere */
} vl__jr;

void vl__jr_init(vl__jr *r, const char *text, size_t len);
void vl__jr_free(vl__jr *r);

/* Opens a container: expects '{' or '[' (open) after whitespace. */
bool vl__jr_open(vl__jr *r, char open);
/* Moves to the next member of the open container: *more false (and the container closed) at
 * its end. first is true for the first call after vl__jr_open. */
bool vl__jr_next(vl__jr *r, char close, bool first, bool *more);
/* Reads an object key and its ':' onto an emptied tape (entry 0; the arena is emptied too). */
bool vl__jr_key(vl__jr *r);
/* Reads one value onto the tape after what is there (the caller empties it with r->n = 0 and
 * r->arena_len = 0 when it is done with the previous value); returns its index or VL__JT_NONE. */
uint32_t vl__jr_value(vl__jr *r);
/* Checks one value as strictly as vl__jr_value reads it, without putting it on the tape (the
 * caller wants only its span: r->pos before and after); false on a problem. */
bool vl__jr_check_value(vl__jr *r);
/* After the document's value: only whitespace may follow (or NUL bytes, when nul_tail_ok). */
bool vl__jr_end(vl__jr *r, bool nul_tail_ok);
/* Is text[0..len) exactly one JSON value, as strictly as vl__json_parse_one takes it (no NUL
 * byte anywhere: a raw one is a control byte or trailing data)? Checked without a tape or tree. */
bool vl__json_is_one_value(const char *text, size_t len);
/* text[0..len) is one JSON object, checked as strictly: the span of its member key's value
 * (the first such member) in *off, *n. false when it is no object or has no such member. */
bool vl__json_member_span(const char *text, size_t len, const char *key, size_t *off, size_t *n);

/* Tape access. */
static inline const char *vl__jt_bytes(const vl__jr *r, uint32_t i) {
  return (r->tape[i].arena ? r->arena : r->text) + r->tape[i].off;
}
static inline vl__jt_type vl__jt_kind(const vl__jr *r, uint32_t i) {
  return (vl__jt_type)r->tape[i].type;
}
/* Is entry i the string s (NUL-terminated)? */
bool vl__jt_is(const vl__jr *r, uint32_t i, const char *s);
/* The value of key in object entry obj, VL__JT_NONE when absent (the first one, if repeated). */
uint32_t vl__jt_get(const vl__jr *r, uint32_t obj, const char *key);
/* A malloc'd NUL-terminated copy of string entry i; NULL when out of memory. */
char *vl__jt_dup(const vl__jr *r, uint32_t i);
/* A whole number within [min, max] and +-2^53 (an integer token, or a float token that is
 * whole), as vl__json_int reads cJSON numbers. */
bool vl__jt_int(const vl__jr *r, uint32_t i, int64_t min, int64_t max, int64_t *out);

#endif
