/* tensor_json_internal.h - what the service needs of the tensor reader beyond the public API. */
#ifndef VIEWLOWER_TENSOR_JSON_INTERNAL_H
#define VIEWLOWER_TENSOR_JSON_INTERNAL_H

#include <cjson/cJSON.h>

#include "viewlower/tensor.h"

/* Reads obj as vl_tensor_from_json_borrow does when that borrows a blob without reading a byte
 * of it: VL_OK and *view (pointing into payload, read only) when obj is a valid blob tensor
 * whose bytes are aligned for borrowing and whose dtype admits every byte pattern (not bool,
 * whose bytes are each checked). Otherwise an error, and nothing is allocated: reading such a
 * tensor (a copy, a check of its bytes) costs work in proportion to its payload. Reads obj's
 * JSON only, never the payload's bytes. */
vl_status vl__tensor_from_json_lendable(const cJSON *obj, const uint8_t *payload,
                                        size_t payload_len, const vl_limits *lim, vl_tensor *view,
                                        vl_error *err);

/* Characters of the padded base64 text of n bytes ("data"). */
uint64_t vl__base64_len(uint64_t n);

#endif
