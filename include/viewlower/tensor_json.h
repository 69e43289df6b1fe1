/* tensor_json.h - tensors as JSON (docs/format.md §4): values (logical order), data (base64,
 * physical order) or blob (a slice of the frame's binary payload). Also scalar formatting. */
#ifndef VIEWLOWER_TENSOR_JSON_H
#define VIEWLOWER_TENSOR_JSON_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "viewlower/buf.h"
#include "viewlower/export.h"
#include "viewlower/status.h"
#include "viewlower/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { VL_ENCODING_VALUES, VL_ENCODING_BASE64, VL_ENCODING_BLOB } vl_encoding;

/* "values" | "base64" | "blob" -> encoding; false when unknown. */
VL_API bool vl_encoding_from_name(const char *name, vl_encoding *out);

/* Parses a spec object {"dtype","shape","dim_order"|"strides","dynamic"?}. Keys other than
 * those and the ones listed in extra_keys (NULL-terminated, may be NULL) are rejected.
 * err->path is relative to obj. */
VL_API vl_status vl_spec_from_json(const cJSON *obj, const char *const *extra_keys, vl_spec *out,
                                   vl_error *err);
/* {"dtype","shape","dim_order"[,"dynamic":true]}; NULL on out-of-memory. */
VL_API cJSON *vl_spec_to_json(const vl_spec *s);

/* Parses a tensor object. payload/payload_len back "blob" references (may be NULL/0).
 * err->path is relative to obj. Caller frees *out with vl_tensor_free. */
VL_API vl_status vl_tensor_from_json(const cJSON *obj, const uint8_t *payload, size_t payload_len,
                                     const vl_limits *lim, vl_tensor **out, vl_error *err);
/* Tensor to JSON. For VL_ENCODING_BLOB the bytes are appended to payload (8-byte aligned
 * offsets) and referenced as {"blob":{"offset","nbytes"}}. NULL on out-of-memory. */
VL_API cJSON *vl_tensor_to_json(const vl_tensor *t, vl_encoding enc, vl_buf *payload);

/* Like vl_tensor_from_json, without copying a blob: when obj's body is a blob whose bytes are
 * 8-byte aligned in payload, *view is filled as a borrowed, non-owning tensor whose data points
 * into payload (*owned is NULL). It must not be written, must not be passed to vl_tensor_free,
 * and is valid only while payload is. Otherwise (values, base64, an unaligned or empty blob)
 * *owned is a new tensor the caller frees with vl_tensor_free, and *view is untouched.
 * Same checks and errors as vl_tensor_from_json. */
VL_API vl_status vl_tensor_from_json_borrow(const cJSON *obj, const uint8_t *payload,
                                            size_t payload_len, const vl_limits *lim,
                                            vl_tensor *view, vl_tensor **owned, vl_error *err);
/* Like vl_tensor_to_json, but for VL_ENCODING_BLOB into an empty payload (data NULL) the
 * tensor's storage is moved into payload instead of copied: payload then owns t's bytes at
 * offset 0 (freed with vl_buf_free) and t is left with data NULL, nbytes 0 (vl_tensor_free it
 * as usual). In every other case t is unchanged and this is vl_tensor_to_json. */
VL_API cJSON *vl_tensor_to_json_take(vl_tensor *t, vl_encoding enc, vl_buf *payload);

/* May t be written with enc under lim? "values" costs a JSON node per element, so tensors of
 * more than lim->max_json_values elements must use base64 or blob (VL_ERR_TOO_LARGE, path
 * "/encoding"). */
VL_API vl_status vl_tensor_encoding_check(const vl_tensor *t, vl_encoding enc,
                                          const vl_limits *lim, vl_error *err);

/* A JSON object mapping names to tensors. err->path is relative to obj ("/x/values/3"). */
VL_API vl_status vl_tensor_map_from_json(const cJSON *obj, const uint8_t *payload,
                                         size_t payload_len, const vl_limits *lim,
                                         vl_tensor_map **out, vl_error *err);

/* One element as a JSON value: shortest round-trip number, "nan"/"inf"/"-inf", decimal string
 * for 64-bit integers beyond +-2^53, true/false for bool. NULL on out-of-memory. */
VL_API cJSON *vl_scalar_to_json(vl_dtype dt, const void *elem);

#ifdef __cplusplus
}
#endif
#endif
