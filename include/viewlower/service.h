/* service.h - the methods of docs/protocol.md as pure calls: JSON params (+ binary payload) in,
 * JSON result (+ payload) out. The daemon runs these on its worker threads; viewlowerctl
 * --local calls them directly, so both modes share every line of logic. */
#ifndef VIEWLOWER_SERVICE_H
#define VIEWLOWER_SERVICE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "viewlower/buf.h"
#include "viewlower/export.h"
#include "viewlower/status.h"
#include "viewlower/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VL_PROTOCOL_VERSION 1

/* Figures a call reports back to its caller (for daemon statistics). */
typedef struct vl_call_stats {
  uint32_t views_replaced;
  int64_t bytes_saved;
} vl_call_stats;

/* How heavy a method is, for a server that runs requests off its I/O thread: a light one is
 * cheap enough to answer where the request was read (when its request is small), a heavy one
 * belongs on a worker. */
typedef enum { VL_METHOD_LIGHT, VL_METHOD_HEAVY } vl_method_weight;

/* The core's methods, published once (src/wire/service.c holds the one table: name, handler,
 * weight): ping, version, validate, lower, execute, verify, view_copy. stats belongs to the
 * daemon. Indexes are stable for a build: 0 .. vl_service_method_count() - 1. */
typedef struct vl_method_info {
  const char *name;
  vl_method_weight weight;
} vl_method_info;

VL_API size_t vl_service_method_count(void);
/* The i-th method, NULL when i is out of range. */
VL_API const vl_method_info *vl_service_method(size_t i);
/* Index of the method named name, or -1. */
VL_API int vl_service_method_index(const char *name);
/* True when method is one of the core methods. */
VL_API bool vl_service_has_method(const char *method);

/* Runs method with params (an object; NULL is treated as {}). On success *result is a new
 * object (caller frees with cJSON_Delete) and binary output, if any, is appended to
 * out_payload. Error paths are relative to params ("/graph/nodes/3/val"). A "graph" member
 * may be a cJSON raw item holding the graph's JSON text (one value, NUL-free): it is read by
 * the graph parser without a tree, with the same result and errors as its tree would get. */
VL_API vl_status vl_service_call(const char *method, const cJSON *params, const uint8_t *payload,
                                 size_t payload_len, const vl_limits *lim, cJSON **result,
                                 vl_buf *out_payload, vl_call_stats *stats, vl_error *err);

/* The library version string. */
VL_API const char *vl_version(void);

#ifdef __cplusplus
}
#endif
#endif
