/* rpc.c - JSON-RPC request checking and response printing.
 *
 * A request's text is exactly one JSON value (vl__json_parse_one, shared with the graph parser
 * and viewlowerctl): no \u0000 escape (cJSON would cut the string there, so two different
 * names could collide), no raw control byte, and nothing but JSON whitespace after the value
 * (else a second request in the same frame would vanish unanswered). Parse error positions
 * come from cJSON's end pointer, never from cJSON_GetErrorPtr (a global shared by every
 * worker thread).
 * Ids are echoed exactly (SPEC §6: responses carry the request's id). cJSON prints numbers
 * at 15 significant digits (9007199254740991 would come back as 9.00719925474099e+15), so a
 * numeric id is kept as its own text (a cJSON raw item), made once by id_echo; the loop's
 * id scanner (vl_rpc_peek_id) goes through the same function. */
#include "rpc.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_util.h"

const char vl_rpc_nomem_response[] =
    "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,\"message\":\"out of memory\","
    "\"data\":{\"kind\":\"out_of_memory\"}}}";
const size_t vl_rpc_nomem_response_len = sizeof vl_rpc_nomem_response - 1;

static const char *const request_members[] = {"jsonrpc", "id", "method", "params"};

static bool is_request_member(const char *key) {
  for (size_t i = 0; i < sizeof request_members / sizeof request_members[0]; i++) {
    if (strcmp(key, request_members[i]) == 0) {
      return true;
    }
  }
  return false;
}

/* JSON whitespace (RFC 8259): cJSON itself skips every byte up to 32, NUL included. */
static bool is_ws(char ch) {
  return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

static size_t skip_ws(const char *s, size_t n, size_t i) {
  while (i < n && is_ws(s[i])) {
    i++;
  }
  return i;
}

static vl_status parse_json(const char *json, size_t len, vl_rpc_request *req, vl_error *err) {
  size_t at = 0;
  switch (vl__json_parse_one(json, len, false, &req->doc, &at)) {
  case VL__JSON_NUL_ESCAPE:
    return vl_error_set(err, VL_ERR_PARSE, "",
                        "invalid JSON at byte %zu: \\u0000 (NUL) escapes are not supported", at);
  case VL__JSON_MALFORMED:
    return vl_error_set(err, VL_ERR_PARSE, "", "invalid JSON at byte %zu", at);
  case VL__JSON_CONTROL:
    return vl_error_set(err, VL_ERR_PARSE, "", "invalid JSON at byte %zu: control character 0x%02x",
                        at, (unsigned)(unsigned char)json[at]);
  case VL__JSON_TRAILING:
    return vl_error_set(err, VL_ERR_PARSE, "",
                        "invalid JSON at byte %zu: text after the JSON value", at);
  case VL__JSON_NOMEM: return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  case VL__JSON_OK: break;
  }
  return VL_OK;
}

/* The text a finite numeric id is echoed as: a whole number within +-2^53 as that integer,
 * anything else as the shortest of %.15g, %.16g, %.17g that reads back to the same double
 * (%.17g always does). buf has room for any of them. */
static void number_text(double v, char buf[32]) {
  if (v >= -VL__JSON_INT_MAX && v <= VL__JSON_INT_MAX && v == (double)(long long)v) {
    snprintf(buf, 32, "%lld", (long long)v);
    return;
  }
  for (int prec = 15; prec < 17; prec++) {
    snprintf(buf, 32, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) {
      return;
    }
  }
  snprintf(buf, 32, "%.17g", v);
}

/* The item a response prints as the id of the request whose id is v (a number, string or
 * null): NULL for null, a copy of a string, the exact text of a number (raw). A number that is
 * not finite as a double (1e400) is refused: it cannot be echoed. */
static vl_status id_echo(const cJSON *v, cJSON **out, vl_error *err) {
  *out = NULL;
  if (cJSON_IsNull(v)) {
    return VL_OK;
  }
  if (cJSON_IsNumber(v)) {
    double d = v->valuedouble;
    if (!isfinite(d)) {
      return vl_error_set(err, VL_ERR_INVALID_REQUEST, "", "\"id\" is not a finite number");
    }
    char text[32];
    number_text(d, text);
    *out = cJSON_CreateRaw(text);
  } else {
    *out = cJSON_CreateString(v->valuestring);
  }
  return *out != NULL ? VL_OK : vl_error_set(err, VL_ERR_NOMEM, "", "cannot copy the id");
}

static bool find_id_value(const char *s, size_t n, size_t *at, size_t *vlen);

/* The id member: a number, string or null. Missing ids are refused: every request gets a
 * response (SPEC §6), so JSON-RPC notifications are not supported. */
static vl_status read_id(vl_rpc_request *req, const char *json, size_t len, vl_error *err) {
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(req->doc, "id");
  if (id == NULL) {
    return vl_error_set(err, VL_ERR_INVALID_REQUEST, "",
                        "missing \"id\" (notifications are not supported)");
  }
  if (!cJSON_IsNumber(id) && !cJSON_IsString(id) && !cJSON_IsNull(id)) {
    return vl_error_set(err, VL_ERR_INVALID_REQUEST, "",
                        "\"id\" must be a number, a string or null");
  }
  vl_status s = id_echo(id, &req->id, err);
  size_t at = 0, n = 0;
  if (s == VL_ERR_INVALID_REQUEST && find_id_value(json, len, &at, &n)) {
    vl_error_set(err, s, "", "\"id\" %.*s%s is not a finite number", n > 40 ? 40 : (int)n,
                 json + at, n > 40 ? "..." : "");
  }
  return s;
}

static vl_status check_members(const cJSON *doc, vl_error *err) {
  const cJSON *ver = cJSON_GetObjectItemCaseSensitive(doc, "jsonrpc");
  if (!cJSON_IsString(ver) || strcmp(ver->valuestring, "2.0") != 0) {
    return vl_error_set(err, VL_ERR_INVALID_REQUEST, "", "\"jsonrpc\" must be \"2.0\"");
  }
  for (const cJSON *m = doc->child; m != NULL; m = m->next) {
    if (!is_request_member(m->string)) {
      return vl_error_set(err, VL_ERR_INVALID_REQUEST, "", "unknown request member \"%.64s\"",
                          m->string);
    }
  }
  if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(doc, "method"))) {
    return vl_error_set(err, VL_ERR_INVALID_REQUEST, "", "\"method\" must be a string");
  }
  return VL_OK;
}

static vl_status read_params(vl_rpc_request *req, vl_error *err) {
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(req->doc, "params");
  if (p == NULL || cJSON_IsNull(p)) {
    return VL_OK;
  }
  if (cJSON_IsArray(p)) {
    return vl_error_set(err, VL_ERR_INVALID_PARAMS, "",
                        "params must be an object (by-name), not an array");
  }
  if (!cJSON_IsObject(p)) {
    return vl_error_set(err, VL_ERR_INVALID_REQUEST, "", "\"params\" must be an object");
  }
  req->params = p;
  return VL_OK;
}

vl_status vl_rpc_request_parse(const char *json, size_t len, vl_rpc_request *req, vl_error *err) {
  memset(req, 0, sizeof *req);
  vl_status s = parse_json(json, len, req, err);
  if (s != VL_OK) {
    return s;
  }
  if (cJSON_IsArray(req->doc)) {
    return vl_error_set(err, VL_ERR_INVALID_REQUEST, "", "batch requests are not supported");
  }
  if (!cJSON_IsObject(req->doc)) {
    return vl_error_set(err, VL_ERR_INVALID_REQUEST, "", "a request must be a JSON object");
  }
  s = read_id(req, json, len, err);
  if (s == VL_OK) {
    s = check_members(req->doc, err);
  }
  if (s == VL_OK) {
    req->method = cJSON_GetObjectItemCaseSensitive(req->doc, "method")->valuestring;
    s = read_params(req, err);
  }
  return s;
}

void vl_rpc_request_free(vl_rpc_request *req) {
  cJSON_Delete(req->doc);
  cJSON_Delete(req->id);
  memset(req, 0, sizeof *req);
}

/* {"jsonrpc":"2.0","id":<copy of id or null>}; NULL on out-of-memory. */
static cJSON *envelope(const cJSON *id) {
  cJSON *o = cJSON_CreateObject();
  cJSON *idc = id != NULL ? cJSON_Duplicate(id, true) : cJSON_CreateNull();
  if (o == NULL || idc == NULL || cJSON_AddStringToObject(o, "jsonrpc", "2.0") == NULL ||
      !cJSON_AddItemToObject(o, "id", idc)) {
    cJSON_Delete(o);
    cJSON_Delete(idc);
    return NULL;
  }
  return o;
}

/* Prints and deletes o. */
static char *print_and_delete(cJSON *o, size_t *len) {
  char *text = o != NULL ? cJSON_PrintUnformatted(o) : NULL;
  cJSON_Delete(o);
  if (text != NULL) {
    *len = strlen(text);
  }
  return text;
}

char *vl_rpc_result_text(const cJSON *id, cJSON *result, size_t *len) {
  cJSON *o = envelope(id);
  if (o == NULL || !cJSON_AddItemToObject(o, "result", result)) {
    cJSON_Delete(result);
    cJSON_Delete(o);
    return NULL;
  }
  return print_and_delete(o, len);
}

static cJSON *error_object(const vl_error *err) {
  cJSON *e = cJSON_CreateObject();
  const char *msg = err->message[0] != '\0' ? err->message : vl_status_text(err->code);
  if (e == NULL || cJSON_AddNumberToObject(e, "code", vl_status_rpc_code(err->code)) == NULL ||
      cJSON_AddStringToObject(e, "message", msg) == NULL) {
    cJSON_Delete(e);
    return NULL;
  }
  cJSON *data = cJSON_AddObjectToObject(e, "data");
  if (data == NULL || cJSON_AddStringToObject(data, "kind", vl_status_kind(err->code)) == NULL ||
      (err->path[0] != '\0' && cJSON_AddStringToObject(data, "path", err->path) == NULL)) {
    cJSON_Delete(e);
    return NULL;
  }
  return e;
}

char *vl_rpc_error_text(const cJSON *id, const vl_error *err, size_t *len) {
  cJSON *o = envelope(id);
  cJSON *e = error_object(err);
  if (o == NULL || e == NULL || !cJSON_AddItemToObject(o, "error", e)) {
    cJSON_Delete(o);
    cJSON_Delete(e);
    return NULL;
  }
  return print_and_delete(o, len);
}

/* ---- the top-level id of an unparsed request -------------------------------------------- */

/* Index just past the string whose opening quote is s[open], or n when it does not close.
 * memchr finds each quote; one is escaped when an odd run of backslashes precedes it. */
static size_t skip_string(const char *s, size_t n, size_t open) {
  size_t i = open + 1;
  for (;;) {
    const char *q = i < n ? memchr(s + i, '"', n - i) : NULL;
    if (q == NULL) {
      return n;
    }
    size_t at = (size_t)(q - s), bs = 0;
    while (at - bs > open + 1 && s[at - bs - 1] == '\\') {
      bs++;
    }
    if (bs % 2 == 0) {
      return at + 1;
    }
    i = at + 1;
  }
}

/* Does any byte of the 8 in w equal b? (The classic "has a zero byte" test on w ^ b...b.) */
static bool word_has(uint64_t w, unsigned b) {
  const uint64_t ones = 0x0101010101010101u;
  uint64_t v = w ^ (ones * b);
  return ((v - ones) & ~v & (ones * 0x80u)) != 0;
}

/* Index of the first byte at or after s[i] that matters inside a nested value (a quote or a
 * bracket), or n. Eight bytes at a time: a long array of numbers is crossed at several GB/s
 * rather than one compare chain per byte. b | 0x20 folds '[' onto '{' and ']' onto '}'. */
static size_t skip_plain(const char *s, size_t n, size_t i) {
  const uint64_t lower = 0x2020202020202020u;
  for (; n - i >= 8; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    if (word_has(w, '"') || word_has(w | lower, '{') || word_has(w | lower, '}')) {
      break;
    }
  }
  while (i < n && s[i] != '"' && s[i] != '{' && s[i] != '[' && s[i] != '}' && s[i] != ']') {
    i++;
  }
  return i;
}

/* Index just past the value that starts at s[i], or n. Brackets are counted, not matched:
 * enough to step over a well-formed value; a malformed one makes the scan end early or late,
 * never outside s. */
static size_t skip_value(const char *s, size_t n, size_t i) {
  if (s[i] == '"') {
    return skip_string(s, n, i);
  }
  if (s[i] != '{' && s[i] != '[') {
    while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && !is_ws(s[i])) {
      i++;
    }
    return i;
  }
  size_t depth = 0;
  while ((i = skip_plain(s, n, i)) < n) {
    char ch = s[i];
    if (ch == '"') {
      i = skip_string(s, n, i);
      continue;
    }
    if (ch == '{' || ch == '[') {
      depth++;
    } else if ((ch == '}' || ch == ']') && --depth == 0) {
      return i + 1;
    }
    i++;
  }
  return n;
}

static int hex_digit(char ch) {
  if (ch >= '0' && ch <= '9') {
    return ch - '0';
  }
  if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'f') {
    return (ch | 0x20) - 'a' + 10;
  }
  return -1;
}

/* Does the member name between quotes, p[0..n), decode to "id"? Escapes count as cJSON reads
 * them ("\u0069d" is "id"); only \uXXXX can decode to a letter. */
static bool name_is_id(const char *p, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; k++) {
    int ch = (unsigned char)p[i];
    if (k >= 2) {
      return false;
    }
    if (ch == '\\') {
      if (n - i < 6 || p[i + 1] != 'u') {
        return false;
      }
      ch = 0;
      for (size_t j = i + 2; j < i + 6; j++) {
        int h = hex_digit(p[j]);
        if (h < 0) {
          return false;
        }
        ch = ch * 16 + h;
      }
      i += 6;
    } else {
      i++;
    }
    if (ch != "id"[k]) {
      return false;
    }
  }
  return k == 2;
}

/* Finds the value of the first top-level "id" member of the object text s[0..n): sets *at and
 * *vlen and returns true, or false when s is not an object or ends (or turns malformed) before
 * such a member. One forward pass that reads each byte at most once (the backslash runs before
 * quotes a second time) and stops at the id's value; allocates nothing. Other members' values
 * are skipped whole (strings with their escapes, nested objects and arrays). */
static bool find_id_value(const char *s, size_t n, size_t *at, size_t *vlen) {
  size_t i = skip_ws(s, n, 0);
  if (i >= n || s[i] != '{') {
    return false;
  }
  for (i++;; i++) {
    i = skip_ws(s, n, i);
    if (i >= n || s[i] != '"') {
      return false;
    }
    size_t name = i, name_end = skip_string(s, n, i);
    i = skip_ws(s, n, name_end);
    if (i >= n || s[i] != ':') {
      return false;
    }
    bool is_id = name_is_id(s + name + 1, name_end - name - 2);
    i = skip_ws(s, n, i + 1);
    if (i >= n) {
      return false;
    }
    size_t end = skip_value(s, n, i);
    if (is_id) {
      *at = i;
      *vlen = end - i;
      return true;
    }
    i = skip_ws(s, n, end);
    if (i >= n || s[i] != ',') {
      return false;
    }
  }
}

cJSON *vl_rpc_peek_id(const char *json, size_t len) {
  size_t at = 0, n = 0;
  if (!find_id_value(json, len, &at, &n) || vl__json_find_nul_escape(json + at, n) < n) {
    return NULL;
  }
  const char *v0 = json + at;
  if (*v0 != '"' && *v0 != '-' && !(*v0 >= '0' && *v0 <= '9') && *v0 != 'n') {
    return NULL; /* an object, array or boolean: not an id (and never parsed here) */
  }
  const char *end = NULL;
  cJSON *v = cJSON_ParseWithLengthOpts(v0, n, &end, false);
  cJSON *id = NULL;
  vl_error err;
  if (v != NULL && end == v0 + n && (cJSON_IsNumber(v) || cJSON_IsString(v) || cJSON_IsNull(v))) {
    id_echo(v, &id, &err);
  }
  cJSON_Delete(v);
  return id;
}
