/* rpc.c - JSON-RPC request checking and response printing.
 *
 * cJSON's parse error position is taken from the end pointer of cJSON_ParseWithLengthOpts,
 * never from cJSON_GetErrorPtr (a global shared by every worker thread).
 * A \u0000 escape is refused before parsing: cJSON decodes it to a NUL that silently cuts
 * the string ("a\u0000b" would read as "a"), so two different names could collide. */
#include "rpc.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "json_util.h"

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

static vl_status parse_json(const char *json, size_t len, vl_rpc_request *req, vl_error *err) {
  size_t nul = vl__json_find_nul_escape(json, len);
  if (nul < len) {
    return vl_error_set(err, VL_ERR_PARSE, "",
                        "invalid JSON at byte %zu: \\u0000 (NUL) escapes are not supported", nul);
  }
  const char *end = NULL;
  req->doc = cJSON_ParseWithLengthOpts(json, len, &end, false);
  if (req->doc != NULL) {
    return VL_OK;
  }
  size_t at = end != NULL && end >= json && end <= json + len ? (size_t)(end - json) : 0;
  return vl_error_set(err, VL_ERR_PARSE, "", "invalid JSON at byte %zu", at);
}

/* The id member: a number, string or null. Missing ids are refused: every request gets a
 * response (SPEC §6), so JSON-RPC notifications are not supported. */
static vl_status read_id(vl_rpc_request *req, vl_error *err) {
  const cJSON *id = cJSON_GetObjectItemCaseSensitive(req->doc, "id");
  if (id == NULL) {
    return vl_error_set(err, VL_ERR_INVALID_REQUEST, "",
                        "missing \"id\" (notifications are not supported)");
  }
  if (!cJSON_IsNumber(id) && !cJSON_IsString(id) && !cJSON_IsNull(id)) {
    return vl_error_set(err, VL_ERR_INVALID_REQUEST, "",
                        "\"id\" must be a number, a string or null");
  }
  req->id = id;
  return VL_OK;
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
  s = read_id(req, err);
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

/* Index of the quote closing the string opened at json[open], or n when it does not close. */
static size_t string_end(const char *json, size_t n, size_t open) {
  for (size_t i = open + 1; i < n; i++) {
    if (json[i] == '\\') {
      i++;
    } else if (json[i] == '"') {
      return i;
    }
  }
  return n;
}

/* The value at text[0..n) if it is a valid id (number, string or null), else NULL. */
static cJSON *parse_id_value(const char *text, size_t n) {
  const char *end = NULL;
  cJSON *v = cJSON_ParseWithLengthOpts(text, n, &end, false);
  if (v != NULL && (cJSON_IsNumber(v) || cJSON_IsString(v) || cJSON_IsNull(v))) {
    return v;
  }
  cJSON_Delete(v);
  return NULL;
}

cJSON *vl_rpc_peek_id(const char *json, size_t len, size_t max_scan) {
  size_t n = len < max_scan ? len : max_scan;
  int depth = 0;
  for (size_t i = 0; i < n; i++) {
    char ch = json[i];
    if (ch == '{' || ch == '[') {
      depth++;
    } else if (ch == '}' || ch == ']') {
      depth--;
    } else if (ch == '"') {
      size_t end = string_end(json, n, i);
      if (end >= n) {
        return NULL;
      }
      /* A string at depth 1 followed by ':' is a member name of the request object. */
      size_t j = end + 1;
      while (j < n && (json[j] == ' ' || json[j] == '\t' || json[j] == '\n' || json[j] == '\r')) {
        j++;
      }
      if (depth == 1 && end == i + 3 && memcmp(json + i + 1, "id", 2) == 0 && j < n &&
          json[j] == ':') {
        return parse_id_value(json + j + 1, n - j - 1);
      }
      i = end;
    }
  }
  return NULL;
}
