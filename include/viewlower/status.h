/* status.h - the one status vocabulary of viewlower, and the caller-owned error record.
 *
 * Every fallible function returns a vl_status (0 is success) and fills a vl_error the caller
 * owns: the status, a JSON pointer to the offending place (may be empty) and a one-line reason.
 * There is no global error state. */
#ifndef VIEWLOWER_STATUS_H
#define VIEWLOWER_STATUS_H

#include <stddef.h>

#include "viewlower/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, JSON-RPC error code, kind used in error data, text) */
#define VL_STATUS_MAP(X)                                                                           \
  X(VL_OK, 0, "ok", "success")                                                                     \
  X(VL_ERR_PARSE, -32700, "parse_error", "malformed JSON")                                         \
  X(VL_ERR_INVALID_REQUEST, -32600, "invalid_request", "invalid request")                          \
  X(VL_ERR_UNKNOWN_METHOD, -32601, "unknown_method", "unknown method")                             \
  X(VL_ERR_INVALID_PARAMS, -32602, "invalid_params", "invalid params")                             \
  X(VL_ERR_INTERNAL, -32603, "internal", "internal error")                                         \
  X(VL_ERR_NOMEM, -32603, "out_of_memory", "out of memory")                                        \
  X(VL_ERR_INVALID_GRAPH, -32001, "invalid_graph", "invalid graph")                                \
  X(VL_ERR_INVALID_TENSOR, -32002, "invalid_tensor", "invalid tensor")                             \
  X(VL_ERR_KERNEL, -32003, "kernel_error", "kernel error")                                         \
  X(VL_ERR_UNSUPPORTED, -32003, "unsupported_target", "unsupported target")                        \
  X(VL_ERR_TOO_LARGE, -32004, "too_large", "too large")                                            \
  X(VL_ERR_OVERLOADED, -32005, "overloaded", "overloaded")                                         \
  X(VL_ERR_NOT_PERMITTED, -32006, "not_permitted", "not permitted")                                \
  X(VL_ERR_SHUTTING_DOWN, -32007, "shutting_down", "shutting down")                                \
  X(VL_ERR_IO, -32603, "io_error", "I/O error")                                                    \
  X(VL_ERR_TIMEOUT, -32603, "timeout", "timed out")                                                \
  X(VL_ERR_PROTOCOL, -32600, "protocol_error", "protocol error")

typedef enum {
#define VL__STATUS_ENUM(name, code, kind, text) name,
  VL_STATUS_MAP(VL__STATUS_ENUM)
#undef VL__STATUS_ENUM
      VL_STATUS_COUNT
} vl_status;

#define VL_ERROR_PATH_MAX 256
#define VL_ERROR_MESSAGE_MAX 512

typedef struct vl_error {
  vl_status code;
  char path[VL_ERROR_PATH_MAX];       /* JSON pointer, "" when there is none */
  char message[VL_ERROR_MESSAGE_MAX]; /* one line, no trailing period */
} vl_error;

VL_API const char *vl_status_text(vl_status s);
/* The JSON-RPC error code of a status (0 for VL_OK). */
VL_API int vl_status_rpc_code(vl_status s);
/* Short machine-readable kind, e.g. "invalid_graph". */
VL_API const char *vl_status_kind(vl_status s);

VL_API void vl_error_clear(vl_error *err);
/* Sets err (when non-NULL) and returns code, so callers can `return vl_error_set(...)`. */
VL_API vl_status vl_error_set(vl_error *err, vl_status code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Prepends a pointer prefix ("/graph") to err->path. */
VL_API void vl_error_prefix(vl_error *err, const char *prefix);
/* Formats "path: message" (or just the message) into buf; returns buf. */
VL_API const char *vl_error_format(const vl_error *err, char *buf, size_t n);

/* Appends "/token" to a JSON pointer held in buf (escaping '~' and '/'); for building paths. */
VL_API void vl_pointer_append(char *buf, size_t n, const char *token);
VL_API void vl_pointer_append_index(char *buf, size_t n, size_t index);

#ifdef __cplusplus
}
#endif
#endif
