/* service_internal.h - the service calls for a caller that can keep the request payload alive
 * until the response is sent (the daemon). */
#ifndef VL_WIRE_SERVICE_INTERNAL_H
#define VL_WIRE_SERVICE_INTERNAL_H

#include "viewlower/service.h"

/* vl_service_call, where a method whose binary output is a range of the request payload may
 * answer with that range instead of a copy: on success, an out_payload with data != NULL and
 * cap 0 borrows payload's bytes (data points into payload, len bytes). The caller then keeps
 * payload alive until it has sent them and must not free out_payload. Only a view_copy lends:
 * a blob input and output in their memory order, with "encoding": "blob" (a reshape of
 * contiguous data moves no byte). On failure nothing is lent. max_result_bytes (0: none) bounds
 * the result's JSON and payload the caller can send (its frame limit): outputs whose encoding
 * alone would pass it are refused (VL_ERR_TOO_LARGE) before any is encoded. */
vl_status vl__service_call_lending(const char *method, const cJSON *params, const uint8_t *payload,
                                   size_t payload_len, const vl_limits *lim,
                                   uint64_t max_result_bytes, cJSON **result, vl_buf *out_payload,
                                   vl_call_stats *stats, vl_error *err);

/* Would vl__service_call_lending answer this call by lending, with no work in proportion to
 * the payload (reading the params' JSON and checking the input's spec)? The daemon answers such
 * a call on its event loop. It reads the JSON only, never a byte of the payload, and allocates
 * no tensor: false for an input that would be copied (a blob not aligned for borrowing) or
 * checked byte by byte (bool), and for any call answered otherwise, errors included. */
bool vl__service_lends(const char *method, const cJSON *params, const uint8_t *payload,
                       size_t payload_len, const vl_limits *lim);

#endif
