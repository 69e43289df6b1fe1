/* service.h - the methods of SPEC §6 as pure calls: JSON params (+ binary payload) in,
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

/* True when method is one of the core methods below (lower, execute, verify, view_copy,
 * validate, ping, version). stats belongs to the daemon. */
VL_API bool vl_service_has_method(const char *method);

/* Runs method with params (an object; NULL is treated as {}). On success *result is a new
 * object (caller frees with cJSON_Delete) and binary output, if any, is appended to
 * out_payload. Error paths are relative to params ("/graph/nodes/3/val"). */
VL_API vl_status vl_service_call(const char *method, const cJSON *params, const uint8_t *payload,
                                 size_t payload_len, const vl_limits *lim, cJSON **result,
                                 vl_buf *out_payload, vl_call_stats *stats, vl_error *err);

/* The library version string. */
VL_API const char *vl_version(void);

#ifdef __cplusplus
}
#endif
#endif
