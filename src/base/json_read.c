/* json_read.c - the strict streaming JSON reader and its tape (see json_read.h). */
#include "base/json_read.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_num.h"
#include "base/json_util.h"

void vl__jr_init(vl__jr *r, const char *text, size_t len) {
  memset(r, 0, sizeof *r);
  r->text = text;
  r->len = len;
  r->max_depth = CJSON_NESTING_LIMIT;
}

void vl__jr_free(vl__jr *r) {
  free(r->tape);
  free(r->arena);
  r->tape = NULL;
  r->arena = NULL;
  r->n = r->cap = 0;
  r->arena_len = r->arena_cap = 0;
}

static bool problem(vl__jr *r, vl__json_problem p, size_t at) {
  if (r->problem == VL__JSON_OK) {
    r->problem = p;
    r->at = at;
  }
  return false;
}

/* Skips JSON whitespace; a raw control byte there is a problem. */
static bool skip_ws(vl__jr *r) {
  size_t p = vl__json_ws_end(r->text, r->len, r->pos);
  r->pos = p;
  if (p < r->len && (unsigned char)r->text[p] < 0x20) return problem(r, VL__JSON_CONTROL, p);
  return r->problem == VL__JSON_OK;
}

static uint32_t push(vl__jr *r, vl__jt_type type) {
  if (r->checking && r->n < r->cap) {
    return r->n; /* the same entry for every value: only their syntax matters */
  }
  if (r->n == r->cap) {
    uint32_t cap = r->cap ? r->cap * 2 : 64;
    vl__jt *t = cap > r->cap ? realloc(r->tape, cap * sizeof *t) : NULL;
    if (t == NULL) {
      problem(r, VL__JSON_NOMEM, r->pos);
      return VL__JT_NONE;
    }
    r->tape = t;
    r->cap = cap;
  }
  vl__jt *e = &r->tape[r->n];
  memset(e, 0, sizeof *e);
  e->type = (uint8_t)type;
  return r->n++;
}

static bool arena_put(vl__jr *r, const char *s, size_t n) {
  if (n == 0 || r->checking) return true;
  if (r->arena_cap - r->arena_len < n) {
    size_t cap = r->arena_cap ? r->arena_cap : 256;
    while (cap - r->arena_len < n) {
      if (cap > SIZE_MAX / 2) return problem(r, VL__JSON_NOMEM, r->pos);
      cap *= 2;
    }
    char *a = realloc(r->arena, cap);
    if (a == NULL) return problem(r, VL__JSON_NOMEM, r->pos);
    r->arena = a;
    r->arena_cap = cap;
  }
  memcpy(r->arena + r->arena_len, s, n);
  r->arena_len += n;
  return true;
}

/* The escape at r->pos (a backslash) decoded into the arena; r->pos moves past it. */
static bool unescape(vl__jr *r) {
  size_t at = r->pos;
  if (at + 1 >= r->len) return problem(r, VL__JSON_MALFORMED, r->len);
  char c = r->text[at + 1], out[4];
  static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
  const char *k = c != '\0' ? strchr(from, c) : NULL;
  if (k != NULL) {
    r->pos = at + 2;
    return arena_put(r, &to[k - from], 1);
  }
  /* every refused escape is placed at its backslash (vl__json_malformed_reason says why) */
  if (c != 'u') return problem(r, VL__JSON_MALFORMED, at);
  long cp = vl__json_hex4(r->text, r->len, at + 2);
  size_t end = at + 6;
  if (cp < 0) return problem(r, VL__JSON_MALFORMED, at);
  if (cp == 0) return problem(r, VL__JSON_NUL_ESCAPE, at);
  if (cp >= 0xDC00 && cp <= 0xDFFF) return problem(r, VL__JSON_MALFORMED, at);
  if (cp >= 0xD800 && cp <= 0xDBFF) { /* a high surrogate needs its low half next */
    long lo = end + 1 < r->len && r->text[end] == '\\' && r->text[end + 1] == 'u'
                  ? vl__json_hex4(r->text, r->len, end + 2)
                  : -1;
    if (lo < 0xDC00 || lo > 0xDFFF) return problem(r, VL__JSON_MALFORMED, at);
    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    end += 6;
  }
  r->pos = end;
  return arena_put(r, out, vl__utf8_encode((uint32_t)cp, out));
}

/* Bytes that end a plain run inside a string: the quote, a backslash, control bytes. */
static const bool stops_string[256] = {
    [0] = 1,  [1] = 1,  [2] = 1,  [3] = 1,  [4] = 1,  [5] = 1,  [6] = 1,  [7] = 1,
    [8] = 1,  [9] = 1,  [10] = 1, [11] = 1, [12] = 1, [13] = 1, [14] = 1, [15] = 1,
    [16] = 1, [17] = 1, [18] = 1, [19] = 1, [20] = 1, [21] = 1, [22] = 1, [23] = 1,
    [24] = 1, [25] = 1, [26] = 1, [27] = 1, [28] = 1, [29] = 1, [30] = 1, [31] = 1,
    ['"'] = 1, ['\\'] = 1};

/* The bytes of w equal to b, or (below) less than b (b <= 0x80), as their top bits: the
 * classic "has a zero byte" tests on whole words. A borrow only runs on past a byte that does
 * match, so the lowest flag always marks a true match (bytes above it may be flagged wrongly). */
static uint64_t word_eq(uint64_t w, unsigned b) {
  const uint64_t ones = 0x0101010101010101u;
  uint64_t v = w ^ (ones * b);
  return (v - ones) & ~v & (ones * 0x80u);
}

static uint64_t word_below(uint64_t w, unsigned b) {
  const uint64_t ones = 0x0101010101010101u;
  return (w - ones * b) & ~w & (ones * 0x80u);
}

/* Index of the first byte at or after t[p] that ends a plain run (stops_string), or n: eight
 * bytes at a time, so the long messages of a report are crossed a word per step instead of a
 * table lookup per byte. */
static size_t plain_run(const unsigned char *t, size_t p, size_t n) {
  for (; n - p >= 8; p += 8) {
    uint64_t w;
    memcpy(&w, t + p, 8);
    uint64_t stop = word_eq(w, '"') | word_eq(w, '\\') | word_below(w, 0x20);
    if (stop != 0) {
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
      return p + (size_t)__builtin_ctzll(stop) / 8; /* the lowest flag: a true stop */
#else
      break;
#endif
    }
  }
  while (p < n && !stops_string[t[p]]) p++;
  return p;
}

/* A string at r->pos (its opening quote) onto the tape: a span of the text when it has no
 * escapes, else decoded into the arena. */
static uint32_t read_string(vl__jr *r) {
  uint32_t i = push(r, VL__JT_STRING);
  if (i == VL__JT_NONE) return i;
  const unsigned char *t = (const unsigned char *)r->text;
  size_t start = ++r->pos, n = r->len, p = plain_run(t, start, n);
  r->pos = p;
  if (p < n && t[p] == '"') {
    r->pos = p + 1;
    r->tape[i].off = start;
    r->tape[i].len = (uint32_t)(p - start);
    if (p - start > UINT32_MAX) problem(r, VL__JSON_MALFORMED, start);
    return r->problem == VL__JSON_OK ? i : VL__JT_NONE;
  }
  size_t arena_start = r->arena_len;
  if (!arena_put(r, r->text + start, p - start)) return VL__JT_NONE;
  for (;;) {
    if (r->pos >= n) return problem(r, VL__JSON_MALFORMED, n), VL__JT_NONE;
    unsigned char c = t[r->pos];
    if (c == '"') break;
    if (c < 0x20) return problem(r, VL__JSON_CONTROL, r->pos), VL__JT_NONE;
    if (c == '\\') {
      if (!unescape(r)) return VL__JT_NONE;
      continue;
    }
    size_t run = plain_run(t, r->pos, n);
    if (!arena_put(r, r->text + r->pos, run - r->pos)) return VL__JT_NONE;
    r->pos = run;
  }
  r->pos++;
  if (r->arena_len - arena_start > UINT32_MAX) return problem(r, VL__JSON_MALFORMED, start), VL__JT_NONE;
  r->tape[i].arena = true;
  r->tape[i].off = arena_start;
  r->tape[i].len = (uint32_t)(r->arena_len - arena_start);
  return i;
}

static uint32_t read_word(vl__jr *r, const char *word, vl__jt_type type) {
  size_t n = strlen(word);
  if (r->len - r->pos < n || memcmp(r->text + r->pos, word, n) != 0) {
    return problem(r, VL__JSON_MALFORMED, r->pos), VL__JT_NONE;
  }
  r->pos += n;
  return push(r, type);
}

static uint32_t read_number(vl__jr *r) {
  bool is_float;
  size_t n = vl__num_scan(r->text + r->pos, r->len - r->pos, &is_float);
  if (n == 0 || n > UINT32_MAX) return problem(r, VL__JSON_MALFORMED, r->pos), VL__JT_NONE;
  uint32_t i = push(r, VL__JT_NUMBER);
  if (i == VL__JT_NONE) return i;
  r->tape[i].off = r->pos;
  r->tape[i].len = (uint32_t)n;
  r->pos += n;
  return i;
}

bool vl__jr_open(vl__jr *r, char open) {
  if (!skip_ws(r)) return false;
  if (r->pos >= r->len || r->text[r->pos] != open) {
    return problem(r, VL__JSON_MALFORMED, r->pos);
  }
  if (r->depth >= r->max_depth) return problem(r, VL__JSON_MALFORMED, r->pos);
  r->depth++;
  r->pos++;
  return true;
}

bool vl__jr_next(vl__jr *r, char close, bool first, bool *more) {
  *more = false;
  if (!skip_ws(r)) return false;
  char c = r->pos < r->len ? r->text[r->pos] : '\0';
  if (c == close) {
    r->pos++;
    r->depth--;
    return true;
  }
  if (!first) {
    if (c != ',') return problem(r, VL__JSON_MALFORMED, r->pos);
    r->pos++;
    if (!skip_ws(r)) return false;
  }
  if (r->pos >= r->len) return problem(r, VL__JSON_MALFORMED, r->pos);
  *more = true;
  return true;
}

static uint32_t read_value(vl__jr *r);

/* The members of a container whose entry is i, r->pos just past its opening bracket. */
static bool read_members(vl__jr *r, uint32_t i, bool object) {
  bool more = false;
  uint32_t count = 0;
  for (bool first = true; vl__jr_next(r, object ? '}' : ']', first, &more) && more; first = false) {
    if (object) {
      if (r->text[r->pos] != '"') return problem(r, VL__JSON_MALFORMED, r->pos);
      uint32_t k = read_string(r);
      if (k == VL__JT_NONE || !skip_ws(r)) return false;
      r->tape[k].next = k + 1;
      if (r->pos >= r->len || r->text[r->pos] != ':') return problem(r, VL__JSON_MALFORMED, r->pos);
      r->pos++;
    }
    if (read_value(r) == VL__JT_NONE) return false;
    if (++count == UINT32_MAX) return problem(r, VL__JSON_MALFORMED, r->pos);
  }
  if (r->problem != VL__JSON_OK) return false;
  r->tape[i].len = count;
  return true;
}

static uint32_t read_value(vl__jr *r) {
  if (!skip_ws(r)) return VL__JT_NONE;
  if (r->pos >= r->len) return problem(r, VL__JSON_MALFORMED, r->pos), VL__JT_NONE;
  char c = r->text[r->pos];
  uint32_t i;
  switch (c) {
  case '"': i = read_string(r); break;
  case 't': i = read_word(r, "true", VL__JT_TRUE); break;
  case 'f': i = read_word(r, "false", VL__JT_FALSE); break;
  case 'n': i = read_word(r, "null", VL__JT_NULL); break;
  case '{':
  case '[':
    if (!vl__jr_open(r, c)) return VL__JT_NONE;
    i = push(r, c == '{' ? VL__JT_OBJECT : VL__JT_ARRAY);
    if (i != VL__JT_NONE && !read_members(r, i, c == '{')) i = VL__JT_NONE;
    break;
  default: i = read_number(r); break;
  }
  if (i != VL__JT_NONE) r->tape[i].next = r->n;
  return i;
}

uint32_t vl__jr_value(vl__jr *r) {
  return r->problem == VL__JSON_OK ? read_value(r) : VL__JT_NONE;
}

/* A string without escapes or raw control bytes at t[*p] (its opening quote): *p moves past its
 * closing quote. false for anything else (check_fast leaves that to the slow reader). */
static bool plain_string_at(const unsigned char *t, size_t *p, size_t n) {
  if (*p >= n || t[*p] != '"') return false;
  size_t q = plain_run(t, *p + 1, n);
  if (q >= n || t[q] != '"') return false;
  *p = q + 1;
  return true;
}

/* The fast check of vl__jr_check_value: one pass, no tape, no recursion (a bit per open
 * container says object or array). It accepts only what read_value accepts and gives up (false)
 * on anything it does not take on itself: any problem, an escape, a raw control byte, nesting
 * past the reader's limit. The caller then reads the value the slow way, which decides and
 * places the problem. *end: just past the value, where read_value leaves r->pos. Checking a
 * lowering's 1.4 KB result took 2.9 us the slow way, 1.2 us so. */
static bool check_fast(const vl__jr *r, size_t *end) {
  const unsigned char *t = (const unsigned char *)r->text;
  size_t p = r->pos, n = r->len;
  uint64_t objects[(CJSON_NESTING_LIMIT + 63) / 64] = {0}; /* bit d: level d is an object */
  int level = 0, room = r->max_depth - r->depth;
  bool key = false; /* next: an object member's key and its colon, then the value */
  if (room > CJSON_NESTING_LIMIT) return false;
#define WS() (p = vl__json_ws_end(r->text, n, p))
  for (;;) {
    WS();
    if (key) {
      if (!plain_string_at(t, &p, n)) return false;
      WS();
      if (p >= n || t[p] != ':') return false;
      p++;
      WS();
      key = false;
    }
    if (p >= n) return false;
    unsigned char c = t[p];
    if (c == '{' || c == '[') {
      if (level >= room) return false;
      uint64_t bit = (uint64_t)1 << (level % 64);
      objects[level / 64] = c == '{' ? objects[level / 64] | bit : objects[level / 64] & ~bit;
      level++;
      p++;
      WS();
      if (p >= n || t[p] != (c == '{' ? '}' : ']')) {
        key = c == '{';
        continue; /* its first member */
      }
      level--;
      p++;
    } else if (c == '"') {
      if (!plain_string_at(t, &p, n)) return false;
    } else if (c == 't' || c == 'f' || c == 'n') {
      const char *word = c == 't' ? "true" : c == 'f' ? "false" : "null";
      size_t k = strlen(word);
      if (n - p < k || memcmp(t + p, word, k) != 0) return false;
      p += k;
    } else {
      bool is_float;
      size_t k = vl__num_scan(r->text + p, n - p, &is_float);
      if (k == 0 || k > UINT32_MAX) return false;
      p += k;
    }
    for (;;) { /* after a value: the end, a close, or a comma and the next member */
      if (level == 0) {
        *end = p;
        return true;
      }
      bool object = (objects[(level - 1) / 64] >> ((level - 1) % 64)) & 1;
      WS();
      if (p < n && t[p] == (object ? '}' : ']')) {
        level--;
        p++;
        continue;
      }
      if (p >= n || t[p] != ',') return false;
      p++;
      key = object;
      break;
    }
  }
#undef WS
}

bool vl__jr_check_value(vl__jr *r) {
  size_t end = 0;
  if (r->problem == VL__JSON_OK && r->len <= UINT32_MAX && check_fast(r, &end)) {
    r->pos = end;
    return true;
  }
  uint32_t n = r->n;
  r->checking = true;
  bool ok = r->problem == VL__JSON_OK && read_value(r) != VL__JT_NONE;
  r->checking = false;
  r->n = n;
  return ok;
}

bool vl__jr_key(vl__jr *r) {
  r->n = 0;
  r->arena_len = 0;
  if (r->problem != VL__JSON_OK) return false;
  if (r->text[r->pos] != '"') return problem(r, VL__JSON_MALFORMED, r->pos);
  uint32_t k = read_string(r);
  if (k == VL__JT_NONE || !skip_ws(r)) return false;
  r->tape[k].next = r->n;
  if (r->pos >= r->len || r->text[r->pos] != ':') return problem(r, VL__JSON_MALFORMED, r->pos);
  r->pos++;
  return true;
}

bool vl__json_is_one_value(const char *text, size_t len) {
  vl__jr r;
  vl__jr_init(&r, text, len);
  bool ok = vl__jr_check_value(&r) && vl__jr_end(&r, false);
  vl__jr_free(&r);
  return ok;
}

bool vl__json_member_span(const char *text, size_t len, const char *key, size_t *off, size_t *n) {
  vl__jr r;
  vl__jr_init(&r, text, len);
  bool found = false, more = false, ok = vl__jr_open(&r, '{');
  for (bool first = true; ok && vl__jr_next(&r, '}', first, &more) && more; first = false) {
    ok = vl__jr_key(&r) && skip_ws(&r);
    bool want = ok && !found && vl__jt_is(&r, 0, key);
    size_t start = r.pos;
    ok = ok && vl__jr_check_value(&r);
    if (ok && want) {
      found = true;
      *off = start;
      *n = r.pos - start;
    }
  }
  ok = ok && r.problem == VL__JSON_OK && vl__jr_end(&r, false);
  vl__jr_free(&r);
  return ok && found;
}

bool vl__jr_end(vl__jr *r, bool nul_tail_ok) {
  if (r->problem != VL__JSON_OK) return false;
  size_t p = vl__json_ws_end(r->text, r->len, r->pos);
  if (p < r->len && !(nul_tail_ok && r->text[p] == '\0')) return problem(r, VL__JSON_TRAILING, p);
  return true;
}

bool vl__jt_is(const vl__jr *r, uint32_t i, const char *s) {
  size_t n = strlen(s);
  return r->tape[i].type == VL__JT_STRING && r->tape[i].len == n &&
         memcmp(vl__jt_bytes(r, i), s, n) == 0;
}

uint32_t vl__jt_get(const vl__jr *r, uint32_t obj, const char *key) {
  if (obj == VL__JT_NONE || r->tape[obj].type != VL__JT_OBJECT) return VL__JT_NONE;
  size_t n = strlen(key);
  uint32_t k = obj + 1;
  for (uint32_t m = 0; m < r->tape[obj].len; m++) {
    if (r->tape[k].len == n && memcmp(vl__jt_bytes(r, k), key, n) == 0) return k + 1;
    k = r->tape[k + 1].next;
  }
  return VL__JT_NONE;
}

char *vl__jt_dup(const vl__jr *r, uint32_t i) {
  char *s = malloc((size_t)r->tape[i].len + 1);
  if (s == NULL) return NULL;
  memcpy(s, vl__jt_bytes(r, i), r->tape[i].len);
  s[r->tape[i].len] = '\0';
  return s;
}

bool vl__jt_int(const vl__jr *r, uint32_t i, int64_t min, int64_t max, int64_t *out) {
  if (r->tape[i].type != VL__JT_NUMBER) return false;
  bool is_float;
  int64_t v = 0;
  double d = 0;
  if (vl__num_parse(vl__jt_bytes(r, i), r->tape[i].len, &is_float, &v, &d) != VL__NUM_OK) {
    return false;
  }
  if (is_float) {
    if (!isfinite(d) || floor(d) != d || fabs(d) > VL__JSON_INT_MAX) return false;
    v = (int64_t)d;
  } else if (v > (int64_t)VL__JSON_INT_MAX || v < -(int64_t)VL__JSON_INT_MAX) {
    return false;
  }
  if (v < min || v > max) return false;
  *out = v;
  return true;
}
