/* envelope.c - the JSON-RPC 2.0 envelope of both ends: requests checked and responses printed
 * (daemon), requests printed and responses checked (client), and the status map's inverse.
 *
 * A request's text is exactly one JSON value (vl__json_parse_one, shared with the graph parser
 * and viewlowerctl): no \u0000 escape (cJSON would cut the string there, so two different
 * names could collide), no raw control byte, and nothing but JSON whitespace after the value
 * (else a second request in the same frame would vanish unanswered). Parse error positions
 * come from cJSON's end pointer, never from cJSON_GetErrorPtr (a global shared by every
 * worker thread).
 * Ids are echoed exactly (docs/protocol.md: responses carry the request's id). cJSON prints numbers
 * at 15 significant digits (9007199254740991 would come back as 9.00719925474099e+15), and a
 * double cannot hold every 64-bit integer (9007199254740993 reads as 2^53), so a numeric id is
 * echoed as its own token text (a cJSON raw item), made once by id_echo; the loop's id scanner
 * (vl__rpc_peek_id) goes through the same function. */
#include "wire/envelope.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_read.h"
#include "base/json_util.h"
#include "base/json_write.h"

const char vl__rpc_nomem_response[] =
    "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,\"message\":\"out of memory\","
    "\"data\":{\"kind\":\"out_of_memory\"}}}";
const size_t vl__rpc_nomem_response_len = sizeof vl__rpc_nomem_response - 1;

static const char *const request_members[] = {"jsonrpc", "id", "method", "params", NULL};
static const char *const response_members[] = {"jsonrpc", "id", "result", "error", NULL};
static const char *const error_members[] = {"code", "message", "data", NULL};

/* Index of key in names (NULL-terminated), or -1. */
static int member_index(const char *const *names, const char *key) {
  for (int i = 0; names[i] != NULL; i++) {
    if (strcmp(key, names[i]) == 0) {
      return i;
    }
  }
  return -1;
}

/* How many members of obj are named key (cJSON keeps duplicates; lookups see the first). */
static unsigned count_members(const cJSON *obj, const char *key) {
  unsigned n = 0;
  for (const cJSON *m = obj->child; m != NULL; m = m->next) {
    n += strcmp(m->string, key) == 0;
  }
  return n;
}

/* Every member of obj is one of names, none twice; else code with what is wrong. */
static vl_status check_member_set(const cJSON *obj, const char *const *names, const char *what,
                                  vl_status code, vl_error *err) {
  unsigned seen = 0;
  for (const cJSON *m = obj->child; m != NULL; m = m->next) {
    int i = member_index(names, m->string);
    if (i < 0) {
      return vl_error_set(err, code, "", "unknown %s member \"%.64s\"", what, m->string);
    }
    if (seen & (1u << i)) {
      return vl_error_set(err, code, "", "%s member \"%s\" given twice", what, names[i]);
    }
    seen |= 1u << i;
  }
  return VL_OK;
}

static vl_status parse_json(const char *json, size_t len, vl__rpc_request *req, vl_error *err) {
  size_t at = 0;
  switch (vl__json_parse_one(json, len, false, &req->doc, &at)) {
  case VL__JSON_NUL_ESCAPE:
    return vl_error_set(err, VL_ERR_PARSE, "",
                        "invalid JSON at byte %zu: \\u0000 (NUL) escapes are not supported", at);
  case VL__JSON_MALFORMED: {
    const char *why = vl__json_malformed_reason(json, len, at);
    return vl_error_set(err, VL_ERR_PARSE, "", "invalid JSON at byte %zu%s%s", at,
                        why[0] != '\0' ? ": " : "", why);
  }
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
 * null): NULL for null, a copy of a string, a number's own token text (raw; the strict readers
 * keep it in valuestring), so that 9007199254740993 or 1.0 come back as sent. A number that is
 * not finite as a double (1e400) is refused, as before ids were echoed as text: no client
 * library could match it. */
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
    if (v->valuestring == NULL) {
      number_text(d, text); /* a tree built by a caller, not read from text */
    }
    *out = cJSON_CreateRaw(v->valuestring != NULL ? v->valuestring : text);
  } else {
    /* echoed into the response, which must stay JSON text (UTF-8) */
    if (!vl__utf8_valid(v->valuestring, strlen(v->valuestring))) {
      return vl_error_set(err, VL_ERR_INVALID_REQUEST, "", "\"id\" is not valid UTF-8");
    }
    *out = cJSON_CreateString(v->valuestring);
  }
  return *out != NULL ? VL_OK : vl_error_set(err, VL_ERR_NOMEM, "", "cannot copy the id");
}

static bool find_id_value(const char *s, size_t n, size_t *at, size_t *vlen);

/* The id member: a number, string or null. Missing ids are refused: every request gets a
 * response (docs/protocol.md, "Requests and responses"), so JSON-RPC notifications are not
 * supported. */
static vl_status read_id(vl__rpc_request *req, const char *json, size_t len, vl_error *err) {
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(req->doc, "id");
  if (id == NULL) {
    return vl_error_set(err, VL_ERR_INVALID_REQUEST, "",
                        "missing \"id\" (notifications are not supported)");
  }
  if (count_members(req->doc, "id") > 1) {
    /* which one would a reply name? neither: id null */
    return vl_error_set(err, VL_ERR_INVALID_REQUEST, "", "request member \"id\" given twice");
  }
  if (!cJSON_IsNumber(id) && !cJSON_IsString(id) && !cJSON_IsNull(id)) {
    return vl_error_set(err, VL_ERR_INVALID_REQUEST, "",
                        "\"id\" must be a number, a string or null");
  }
  vl_status s = id_echo(id, &req->id, err);
  size_t at = 0, n = 0;
  if (s == VL_ERR_INVALID_REQUEST && cJSON_IsNumber(id) && find_id_value(json, len, &at, &n)) {
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
  vl_status s = check_member_set(doc, request_members, "request", VL_ERR_INVALID_REQUEST, err);
  if (s != VL_OK) {
    return s;
  }
  const cJSON *method = cJSON_GetObjectItemCaseSensitive(doc, "method");
  if (!cJSON_IsString(method)) {
    return vl_error_set(err, VL_ERR_INVALID_REQUEST, "", "\"method\" must be a string");
  }
  if (!vl__utf8_valid(method->valuestring, strlen(method->valuestring))) {
    return vl_error_set(err, VL_ERR_INVALID_REQUEST, "", "\"method\" is not valid UTF-8");
  }
  return VL_OK;
}

static vl_status read_params(vl__rpc_request *req, vl_error *err) {
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

vl_status vl__rpc_request_parse(const char *json, size_t len, vl__rpc_request *req, vl_error *err) {
  memset(req, 0, sizeof *req);
  req->graph_nodes = -1;
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

bool vl__rpc_request_graph_checked(const vl__rpc_request *req) {
  const cJSON *g = req->params != NULL ? cJSON_GetObjectItemCaseSensitive(req->params, "graph")
                                       : NULL;
  return !cJSON_IsRaw(g) || vl__json_is_one_value(g->valuestring, strlen(g->valuestring));
}

void vl__rpc_request_restore(vl__rpc_request *req) {
  if (req->text != NULL) req->text[req->cut] = req->cut_byte;
  req->text = NULL;
}

void vl__rpc_request_free(vl__rpc_request *req) {
  cJSON_Delete(req->doc); /* the borrowed graph text is a reference: not freed here */
  cJSON_Delete(req->id);
  memset(req, 0, sizeof *req);
}

/* ---- small requests read without a tree of their graph ------------------------------------ */

/* The tree of the value just read by r, whose text starts at or after start: what
 * vl__json_parse_one gives for that text (the same strictness), or NULL. */
static cJSON *tree_of(const vl__jr *r, size_t start) {
  cJSON *doc = NULL;
  size_t at = 0;
  if (vl__json_parse_one(r->text + start, r->pos - start, false, &doc, &at) != VL__JSON_OK) {
    return NULL;
  }
  return doc;
}

static size_t skip_string(const char *s, size_t n, size_t open);

/* The span of the graph object that starts at s[i]: bracket counting as skip_value does, no
 * token checked (the graph parser checks every one of them), and along the way the depth it
 * reaches and the entries of its top-level "nodes" array (-1 when that is not seen as one).
 * Returns the index just past it, or n. */
static size_t skip_graph(const char *s, size_t n, size_t i, int *depth, long *nodes) {
  int d = 0, nodes_at = -1;
  bool empty = true;
  *depth = 0;
  *nodes = -1;
  for (; i < n; i++) {
    char ch = s[i];
    if (ch == '"') {
      size_t end = skip_string(s, n, i);
      if (d == 1 && end - i == 7 && memcmp(s + i, "\"nodes\"", 7) == 0) {
        size_t k = vl__json_ws_end(s, n, end);
        if (k < n && s[k] == ':') k = vl__json_ws_end(s, n, k + 1);
        if (k < n && s[k] == '[' && *nodes < 0) nodes_at = 2, *nodes = 0;
      }
      if (d == nodes_at) empty = false;
      i = end - 1;
    } else if (ch == '{' || ch == '[') {
      if (d == nodes_at) empty = false;
      if (++d > *depth) *depth = d;
    } else if (ch == '}' || ch == ']') {
      if (d == nodes_at) {
        *nodes += !empty;
        nodes_at = -1;
      }
      if (--d == 0) return i + 1;
    } else if (ch == ',' && d == nodes_at) {
      ++*nodes;
    } else if (d == nodes_at && !vl__json_is_ws(ch)) {
      empty = false;
    }
  }
  return n;
}

/* params.graph, r at its value: an object skipped (skip_graph) and kept as its text. The text
 * is only checked by the graph parser when the method runs, so the caller of the scan treats
 * a request whose call fails as unread (vl__rpc_request_scan). Refused: anything but an object,
 * a text with a NUL byte (the reader takes no raw control byte, but this text is not read),
 * one nested deeper than the document may nest. The raw item borrows the text where it lies
 * (a reference: cJSON_Delete leaves it), and req->cut marks the byte after it, which the scan
 * turns into the item's terminating NUL once it has read past it. */
static cJSON *scan_graph(vl__jr *r, vl__rpc_request *req) {
  size_t i = vl__json_ws_end(r->text, r->len, r->pos);
  if (i >= r->len || r->text[i] != '{') return NULL;
  int depth = 0;
  size_t end = skip_graph(r->text, r->len, i, &depth, &req->graph_nodes);
  if (end >= r->len || r->depth + depth > r->max_depth || memchr(r->text + i, '\0', end - i)) {
    return NULL;
  }
  cJSON *raw = vl__json_raw_borrow(r->text + i);
  if (raw == NULL) return NULL;
  req->cut = end;
  r->pos = end;
  return raw;
}

/* The members of params (r just past its '{') into the object p: "graph" as a raw item (and
 * the count of its nodes in *nodes), the others as trees, each checked first by the reader
 * without a tape (so a large member, an execute's inputs, costs its tree alone); none twice. */
static bool scan_params(vl__jr *r, cJSON *p, vl__rpc_request *req) {
  bool more = false;
  for (bool first = true; vl__jr_next(r, '}', first, &more) && more; first = false) {
    if (!vl__jr_key(r)) return false;
    char *key = vl__jt_dup(r, 0);
    size_t start = r->pos;
    cJSON *item = NULL;
    if (key != NULL && cJSON_GetObjectItemCaseSensitive(p, key) == NULL) {
      item = strcmp(key, "graph") == 0 ? scan_graph(r, req)
             : vl__jr_check_value(r)    ? tree_of(r, start)
                                        : NULL;
    }
    bool ok = item != NULL && cJSON_AddItemToObject(p, key, item);
    if (!ok) cJSON_Delete(item);
    free(key);
    if (!ok) return false;
  }
  return more == false && r->problem == VL__JSON_OK;
}

/* One top-level member (its key on r's tape) into req and doc; seen: the members read. */
static bool scan_member(vl__jr *r, vl__rpc_request *req, unsigned *seen) {
  int i = -1;
  for (int k = 0; request_members[k] != NULL && i < 0; k++) {
    if (vl__jt_is(r, 0, request_members[k])) i = k;
  }
  if (i < 0 || (*seen & (1u << i))) return false;
  *seen |= 1u << i;
  size_t start = r->pos;
  if (i == 3) { /* params: an object, or null */
    cJSON *p = cJSON_CreateObject();
    if (p == NULL || !cJSON_AddItemToObject(req->doc, "params", p)) {
      cJSON_Delete(p);
      return false;
    }
    if (vl__jr_open(r, '{')) {
      req->params = p;
      return scan_params(r, p, req);
    }
    /* not an object: fine only for null (r's problem is set, so read it again) */
    vl__jr again;
    vl__jr_init(&again, r->text, r->len);
    again.pos = start;
    again.depth = r->depth;
    uint32_t v = vl__jr_value(&again);
    bool null = v != VL__JT_NONE && vl__jt_kind(&again, v) == VL__JT_NULL;
    r->problem = again.problem;
    r->pos = again.pos;
    vl__jr_free(&again);
    return null;
  }
  uint32_t v = vl__jr_value(r);
  if (v == VL__JT_NONE) return false;
  vl__jt_type t = vl__jt_kind(r, v);
  if (i == 0) return vl__jt_is(r, v, "2.0");
  if (i == 2) { /* method: a string of valid UTF-8 */
    if (t != VL__JT_STRING || !vl__utf8_valid(vl__jt_bytes(r, v), r->tape[v].len)) return false;
    char *m = vl__jt_dup(r, v);
    cJSON *item = m != NULL ? cJSON_CreateString(m) : NULL;
    free(m);
    if (item == NULL || !cJSON_AddItemToObject(req->doc, "method", item)) {
      cJSON_Delete(item);
      return false;
    }
    req->method = item->valuestring;
    return true;
  }
  /* id: a number, string or null, echoed as vl__rpc_request_parse echoes it */
  if (t != VL__JT_NUMBER && t != VL__JT_STRING && t != VL__JT_NULL) return false;
  cJSON *id = tree_of(r, start);
  vl_error err;
  bool ok = id != NULL && id_echo(id, &req->id, &err) == VL_OK;
  cJSON_Delete(id);
  return ok;
}

bool vl__rpc_request_scan(char *json, size_t len, vl__rpc_request *req) {
  memset(req, 0, sizeof *req);
  req->graph_nodes = -1;
  req->cut = SIZE_MAX;
  vl__jr r;
  vl__jr_init(&r, json, len);
  unsigned seen = 0;
  bool more = false, ok = (req->doc = cJSON_CreateObject()) != NULL && vl__jr_open(&r, '{');
  for (bool first = true; ok && vl__jr_next(&r, '}', first, &more) && more; first = false) {
    ok = vl__jr_key(&r) && scan_member(&r, req, &seen);
  }
  /* jsonrpc, id and method are required */
  ok = ok && r.problem == VL__JSON_OK && vl__jr_end(&r, false) && (seen & 7u) == 7u;
  vl__jr_free(&r);
  if (!ok) {
    vl__rpc_request_free(req);
    return false;
  }
  if (req->cut != SIZE_MAX) { /* the graph's text ends here: the borrowed raw item's NUL */
    req->text = json;
    req->cut_byte = json[req->cut];
    json[req->cut] = '\0';
  }
  return true;
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

/* Prints and deletes o: straight into one growing buffer (raw items, such as a tensor's
 * values or a printed graph, copied once), numbers exactly (vl__jw_cjson). */
static char *print_and_delete(cJSON *o, size_t *len) {
  char *text = o != NULL ? vl__json_print(o, len) : NULL;
  cJSON_Delete(o);
  return text;
}

/* Written straight into one buffer: the text print_and_delete gives for the tree
 * {"jsonrpc":"2.0","id":id,"result":result}, without building the envelope. */
char *vl__rpc_result_text(const cJSON *id, cJSON *result, size_t *len) {
  if (result == NULL) return NULL;
  vl_buf b = {0};
  vl__jw w = {&b, false};
  VL__JW_LIT(&w, "{\"jsonrpc\":\"2.0\",\"id\":");
  if (id != NULL) {
    vl__jw_cjson(&w, id);
  } else {
    VL__JW_LIT(&w, "null");
  }
  VL__JW_LIT(&w, ",\"result\":");
  vl__jw_cjson(&w, result);
  vl__jw_char(&w, '}');
  cJSON_Delete(result);
  return vl__jw_finish(&w, len);
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

char *vl__rpc_error_text(const cJSON *id, const vl_error *err, size_t *len) {
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
    while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && !vl__json_is_ws(s[i])) {
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
  size_t i = vl__json_ws_end(s, n, 0);
  if (i >= n || s[i] != '{') {
    return false;
  }
  for (i++;; i++) {
    i = vl__json_ws_end(s, n, i);
    if (i >= n || s[i] != '"') {
      return false;
    }
    size_t name = i, name_end = skip_string(s, n, i);
    i = vl__json_ws_end(s, n, name_end);
    if (i >= n || s[i] != ':') {
      return false;
    }
    bool is_id = name_is_id(s + name + 1, name_end - name - 2);
    i = vl__json_ws_end(s, n, i + 1);
    if (i >= n) {
      return false;
    }
    size_t end = skip_value(s, n, i);
    if (is_id) {
      *at = i;
      *vlen = end - i;
      return true;
    }
    i = vl__json_ws_end(s, n, end);
    if (i >= n || s[i] != ',') {
      return false;
    }
  }
}

cJSON *vl__rpc_peek_id(const char *json, size_t len) {
  size_t at = 0, n = 0;
  /* at + n == len: the value may be cut short (a text still arriving); a whole request never
   * ends with its id's value (its closing brace follows) */
  if (!find_id_value(json, len, &at, &n) || at + n >= len ||
      vl__json_find_nul_escape(json + at, n) < n) {
    return NULL;
  }
  const char *v0 = json + at;
  if (*v0 != '"' && *v0 != '-' && !(*v0 >= '0' && *v0 <= '9') && *v0 != 'n') {
    return NULL; /* an object, array or boolean: not an id (and never parsed here) */
  }
  cJSON *v = NULL, *id = NULL;
  size_t end = 0;
  vl_error err;
  /* the same strict parser as the whole request: "id":01 or "id":2. is no id */
  if (vl__json_parse_one(v0, n, false, &v, &end) == VL__JSON_OK &&
      (cJSON_IsNumber(v) || cJSON_IsString(v) || cJSON_IsNull(v))) {
    id_echo(v, &id, &err);
  }
  cJSON_Delete(v);
  return id;
}

/* ---- the client side ------------------------------------------------------------------------ */

/* {"jsonrpc":"2.0","id":id,"method":method,"params": - the params value and the closing brace
 * are the caller's. */
static void request_head(vl__jw *w, uint64_t id, const char *method) {
  VL__JW_LIT(w, "{\"jsonrpc\":\"2.0\",\"id\":");
  /* exact digits: cJSON prints numbers at 15 significant digits (9007199254740991 would go
   * out as 9.00719925474099e+15) */
  vl__jw_int(w, (int64_t)id);
  VL__JW_LIT(w, ",\"method\":");
  vl__jw_str(w, method);
  VL__JW_LIT(w, ",\"params\":");
}

char *vl__rpc_request_text(uint64_t id, const char *method, const cJSON *params, size_t *len) {
  vl_buf buf = {0};
  vl__jw w = {&buf, false};
  request_head(&w, id, method);
  if (params != NULL) {
    vl__jw_cjson(&w, params); /* numbers parsed from text keep their digits */
  } else {
    VL__JW_LIT(&w, "{}");
  }
  vl__jw_char(&w, '}');
  return vl__jw_finish(&w, len);
}

char *vl__rpc_request_text_raw(uint64_t id, const char *method, const char *params,
                               size_t params_len, size_t *len) {
  vl_buf buf = {0};
  vl__jw w = {&buf, false};
  request_head(&w, id, method);
  vl__jw_raw(&w, params, params_len);
  vl__jw_char(&w, '}');
  return vl__jw_finish(&w, len);
}

bool vl__rpc_response_scan(const char *json, size_t len, bool *id_null, uint64_t *id,
                           size_t *result_off, size_t *result_len) {
  static const char *const names[] = {"jsonrpc", "id", "result", NULL};
  vl__jr r;
  vl__jr_init(&r, json, len);
  unsigned seen = 0;
  bool more = false, ok = vl__jr_open(&r, '{');
  for (bool first = true; ok && vl__jr_next(&r, '}', first, &more) && more; first = false) {
    int i = -1;
    ok = vl__jr_key(&r);
    for (int k = 0; ok && names[k] != NULL && i < 0; k++) {
      if (vl__jt_is(&r, 0, names[k])) i = k;
    }
    ok = ok && i >= 0 && !(seen & (1u << i));
    seen |= ok ? 1u << i : 0;
    size_t start = ok ? vl__json_ws_end(json, len, r.pos) : 0;
    /* the result is only checked: its text is handed over as it is */
    uint32_t v = !ok ? VL__JT_NONE : i != 2 ? vl__jr_value(&r) : vl__jr_check_value(&r) ? 0 : VL__JT_NONE;
    ok = v != VL__JT_NONE;
    int64_t n = 0;
    if (ok && i == 0) ok = vl__jt_is(&r, v, "2.0");
    if (ok && i == 1) {
      *id_null = vl__jt_kind(&r, v) == VL__JT_NULL;
      ok = *id_null || vl__jt_int(&r, v, 0, (int64_t)1 << 53, &n);
      *id = (uint64_t)n;
    }
    if (ok && i == 2) {
      *result_off = start;
      *result_len = r.pos - start;
    }
  }
  ok = ok && r.problem == VL__JSON_OK && vl__jr_end(&r, false) && seen == 7u;
  vl__jr_free(&r);
  return ok;
}

bool vl__rpc_is_transport_status(vl_status s) {
  return s == VL_ERR_IO || s == VL_ERR_TIMEOUT || s == VL_ERR_PROTOCOL;
}

vl_status vl__rpc_status_of(int code, const char *kind) {
  for (int i = 1; i < VL_STATUS_COUNT && kind != NULL; i++) {
    vl_status s = (vl_status)i;
    if (!vl__rpc_is_transport_status(s) && strcmp(vl_status_kind(s), kind) == 0) {
      return s;
    }
  }
  for (int i = 1; i < VL_STATUS_COUNT; i++) {
    vl_status s = (vl_status)i;
    if (!vl__rpc_is_transport_status(s) && vl_status_rpc_code(s) == code) {
      return s;
    }
  }
  return VL_ERR_INTERNAL;
}

static vl_status malformed(vl_error *err, const char *what) {
  return vl_error_set(err, VL_ERR_PROTOCOL, "", "malformed response from the daemon: %s", what);
}

/* The id of a response: null, or a whole number in 0..2^53 (the client sends no other). */
static bool response_id(const cJSON *id, vl__rpc_response *resp) {
  if (cJSON_IsNull(id)) {
    resp->id_null = true;
    return true;
  }
  if (!cJSON_IsNumber(id)) {
    return false;
  }
  double v = id->valuedouble;
  if (!(v >= 0 && v <= VL__JSON_INT_MAX) || v != (double)(uint64_t)v) {
    return false;
  }
  resp->id = (uint64_t)v;
  return true;
}

/* The "error" member: sets resp->error and err (the server's message and path). */
static vl_status response_error(const cJSON *e, vl__rpc_response *resp, vl_error *err) {
  if (!cJSON_IsObject(e)) {
    return malformed(err, "error is not an object");
  }
  if (check_member_set(e, error_members, "error", VL_ERR_PROTOCOL, err) != VL_OK) {
    char why[VL_ERROR_MESSAGE_MAX];
    snprintf(why, sizeof why, "%s", err->message);
    return malformed(err, why);
  }
  const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
  const cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
  const cJSON *data = cJSON_GetObjectItemCaseSensitive(e, "data");
  if (!cJSON_IsNumber(code) || !(fabs(code->valuedouble) <= 2147483647.0) ||
      code->valuedouble != (double)(int)code->valuedouble || !cJSON_IsString(msg)) {
    return malformed(err, "error without an integer code and a message");
  }
  const char *kind = NULL, *path = "";
  if (data != NULL && !cJSON_IsNull(data)) {
    if (!cJSON_IsObject(data)) {
      return malformed(err, "error data is not an object");
    }
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(data, "kind");
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(data, "path");
    if (count_members(data, "kind") > 1 || count_members(data, "path") > 1 ||
        (k != NULL && !cJSON_IsString(k)) || (p != NULL && !cJSON_IsString(p))) {
      return malformed(err, "error data with a kind or path that is not one string");
    }
    kind = k != NULL ? k->valuestring : NULL;
    path = p != NULL ? p->valuestring : "";
  }
  resp->error = vl__rpc_status_of((int)code->valuedouble, kind);
  vl_error_set(err, resp->error, path, "%s", msg->valuestring);
  return VL_OK;
}

vl_status vl__rpc_response_parse(const char *json, size_t len, vl__rpc_response *resp,
                                 vl_error *err) {
  memset(resp, 0, sizeof *resp);
  size_t at = 0;
  switch (vl__json_parse_one(json, len, false, &resp->doc, &at)) {
  case VL__JSON_OK: break;
  case VL__JSON_NOMEM: return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  default: return malformed(err, "invalid JSON");
  }
  const cJSON *doc = resp->doc;
  if (!cJSON_IsObject(doc)) {
    return malformed(err, "not a JSON object");
  }
  if (check_member_set(doc, response_members, "response", VL_ERR_PROTOCOL, err) != VL_OK) {
    char why[VL_ERROR_MESSAGE_MAX];
    snprintf(why, sizeof why, "%s", err->message);
    return malformed(err, why);
  }
  const cJSON *ver = cJSON_GetObjectItemCaseSensitive(doc, "jsonrpc");
  if (!cJSON_IsString(ver) || strcmp(ver->valuestring, "2.0") != 0) {
    return malformed(err, "not a JSON-RPC 2.0 response");
  }
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(doc, "id");
  if (id == NULL || !response_id(id, resp)) {
    return malformed(err, "missing or invalid id");
  }
  cJSON *res = cJSON_GetObjectItemCaseSensitive(doc, "result");
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(doc, "error");
  if ((res == NULL) == (e == NULL)) {
    return malformed(err, "a response needs exactly one of result and error");
  }
  if (e != NULL) {
    return response_error(e, resp, err);
  }
  resp->result = res;
  return VL_OK;
}

void vl__rpc_response_free(vl__rpc_response *resp) {
  cJSON_Delete(resp->doc);
  memset(resp, 0, sizeof *resp);
}
