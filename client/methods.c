/* methods.c - one thin wrapper of vl_client_call per daemon method (docs/protocol.md, "Methods").
 *
 * Params are built as objects holding *references* to the caller's cJSON values, so a large
 * graph is printed straight from the caller's tree and never copied. */
#include <stdlib.h>
#include <string.h>

#include "viewlower/client.h"

/* Adds a reference to item (not owned) under key; a NULL item is left out. */
static bool add_ref(cJSON *obj, const char *key, const cJSON *item) {
  return item == NULL || cJSON_AddItemReferenceToObject(obj, key, (cJSON *)item);
}

static vl_status no_memory(vl_error *err) {
  return vl_error_set(err, VL_ERR_NOMEM, "", "cannot build the request params");
}

vl_status vl_client_ping(vl_client *c, vl_error *err) {
  cJSON *result = NULL;
  vl_status s = vl_client_call(c, "ping", NULL, NULL, 0, &result, NULL, err);
  cJSON_Delete(result);
  return s;
}

vl_status vl_client_version(vl_client *c, char **version, vl_error *err) {
  cJSON *result = NULL;
  vl_status s = vl_client_call(c, "version", NULL, NULL, 0, &result, NULL, err);
  if (s == VL_OK) {
    const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(result, "version"));
    char *copy = v != NULL ? strdup(v) : NULL;
    if (copy == NULL) {
      s = v == NULL ? vl_error_set(err, VL_ERR_PROTOCOL, "", "version result without a version")
                    : no_memory(err);
    } else {
      *version = copy;
    }
  }
  cJSON_Delete(result);
  return s;
}

vl_status vl_client_lower(vl_client *c, const cJSON *graph, const cJSON *options, cJSON **result,
                          vl_error *err) {
  cJSON *params = cJSON_CreateObject();
  vl_status s = VL_ERR_NOMEM;
  if (params != NULL && add_ref(params, "graph", graph) && add_ref(params, "options", options)) {
    s = vl_client_call(c, "lower", params, NULL, 0, result, NULL, err);
  } else {
    no_memory(err);
  }
  cJSON_Delete(params);
  return s;
}

vl_status vl_client_execute(vl_client *c, const cJSON *graph, const cJSON *inputs,
                            const char *encoding, const uint8_t *payload, size_t payload_len,
                            cJSON **result, vl_buf *out_payload, vl_error *err) {
  cJSON *params = cJSON_CreateObject();
  vl_status s = VL_ERR_NOMEM;
  if (params != NULL && add_ref(params, "graph", graph) && add_ref(params, "inputs", inputs) &&
      (encoding == NULL || cJSON_AddStringToObject(params, "encoding", encoding) != NULL)) {
    s = vl_client_call(c, "execute", params, payload, payload_len, result, out_payload, err);
  } else {
    no_memory(err);
  }
  cJSON_Delete(params);
  return s;
}

vl_status vl_client_verify(vl_client *c, const cJSON *graph, const cJSON *options,
                           const cJSON *inputs, int64_t seed, cJSON **result, vl_error *err) {
  cJSON *params = cJSON_CreateObject();
  vl_status s = VL_ERR_NOMEM;
  if (params != NULL && add_ref(params, "graph", graph) && add_ref(params, "options", options) &&
      add_ref(params, "inputs", inputs) &&
      (seed < 0 || cJSON_AddNumberToObject(params, "seed", (double)seed) != NULL)) {
    s = vl_client_call(c, "verify", params, NULL, 0, result, NULL, err);
  } else {
    no_memory(err);
  }
  cJSON_Delete(params);
  return s;
}

vl_status vl_client_view_copy(vl_client *c, const cJSON *params, const uint8_t *payload,
                              size_t payload_len, cJSON **result, vl_buf *out_payload,
                              vl_error *err) {
  return vl_client_call(c, "view_copy", params, payload, payload_len, result, out_payload, err);
}

vl_status vl_client_stats(vl_client *c, cJSON **result, vl_error *err) {
  return vl_client_call(c, "stats", NULL, NULL, 0, result, NULL, err);
}
