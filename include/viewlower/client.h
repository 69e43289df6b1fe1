/* client.h - libviewlower-client: a blocking client of viewlowerd over its Unix socket
 * (docs/protocol.md), on plain POSIX sockets (no event loop, no threads, no signals: sends use
 * MSG_NOSIGNAL, waits use poll with the client's timeout).
 *
 * Ownership: vl_client_connect gives a client the caller releases with vl_client_close.
 * A *result is a new cJSON object the caller frees with cJSON_Delete; binary output is
 * appended to the caller's vl_buf (release with vl_buf_free). Params are only read.
 *
 * Errors: a status of the daemon's error response comes back as that vl_status (mapped from
 * the JSON-RPC code and data.kind), with err->message the server's message and err->path its
 * data.path (a JSON pointer relative to params). Transport failures are VL_ERR_IO (connection
 * refused, reset or closed), VL_ERR_TIMEOUT and VL_ERR_PROTOCOL (the peer broke the framing
 * or JSON-RPC); after one of those the connection is unusable and every later call fails
 * with VL_ERR_IO. vl_client_is_transport_error tells the two families apart.
 *
 * A vl_client is not thread-safe; use one per thread. */
#ifndef VIEWLOWER_CLIENT_H
#define VIEWLOWER_CLIENT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "viewlower/buf.h"
#include "viewlower/export.h"
#include "viewlower/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vl_client vl_client;

/* The id vl_client_recv reports for a response whose id is null (the daemon answers a
 * malformed frame or unparsable JSON that way). */
#define VL_CLIENT_NO_ID UINT64_MAX
/* Request ids are JSON numbers: keep them at or below 2^53 so they read back exactly. */
#define VL_CLIENT_MAX_ID ((uint64_t)1 << 53)
/* Default bound of JSON + payload bytes of one response frame. */
#define VL_CLIENT_DEFAULT_MAX_FRAME_BYTES ((uint64_t)4 << 30)

/* The socket a client uses when given none: $VIEWLOWER_SOCKET, else
 * /run/viewlower/viewlower.sock when running as root, else $XDG_RUNTIME_DIR/viewlower.sock.
 * VL_ERR_INVALID_PARAMS when none applies or the path does not fit in n bytes. */
VL_API vl_status vl_client_default_socket(char *buf, size_t n, vl_error *err);

/* Connects to socket_path (NULL: vl_client_default_socket). timeout_ms bounds the connect and
 * then each call (send + receive); <= 0 waits forever. */
VL_API vl_status vl_client_connect(const char *socket_path, int timeout_ms, vl_client **out,
                                   vl_error *err);
/* Closes the connection and frees the client; NULL is a no-op. */
VL_API void vl_client_close(vl_client *c);
VL_API void vl_client_set_timeout(vl_client *c, int timeout_ms);
/* Bound of one response frame (default VL_CLIENT_DEFAULT_MAX_FRAME_BYTES). */
VL_API void vl_client_set_max_frame_bytes(vl_client *c, uint64_t max_frame_bytes);
/* True for VL_ERR_IO, VL_ERR_TIMEOUT and VL_ERR_PROTOCOL. */
VL_API bool vl_client_is_transport_error(vl_status s);

/* One request and its response. params may be NULL ({}); payload is the request's binary
 * payload (tensors referenced as "blob"); out_payload may be NULL to discard binary output.
 * Must not be mixed with outstanding vl_client_send requests (VL_ERR_INTERNAL then). */
VL_API vl_status vl_client_call(vl_client *c, const char *method, const cJSON *params,
                                const uint8_t *payload, size_t payload_len, cJSON **result,
                                vl_buf *out_payload, vl_error *err);
/* vl_client_call with the result as its JSON text instead of a tree, checked as
 * vl_client_recv_text checks it (*result NUL-terminated, *result_len bytes; free() it; NULL
 * after an error). A large result (a lowered or validated graph) costs its text, not a tree
 * of ~15 times its size. */
VL_API vl_status vl_client_call_text(vl_client *c, const char *method, const cJSON *params,
                                     const uint8_t *payload, size_t payload_len, char **result,
                                     size_t *result_len, vl_buf *out_payload, vl_error *err);

/* Pipelining: send any number of requests with distinct ids (<= VL_CLIENT_MAX_ID), then
 * receive their responses, which may come back in any order. vl_client_recv sets *id to the
 * response's id (VL_CLIENT_NO_ID for a null id) whether the response is a result or an error;
 * on a server error it returns the error's status with *result NULL. result may be NULL to
 * discard it. Interleave sends and receives so that neither side blocks on a full socket
 * buffer: the daemon stops reading a connection with too many requests in flight. */
VL_API vl_status vl_client_send(vl_client *c, uint64_t id, const char *method, const cJSON *params,
                                const uint8_t *payload, size_t payload_len, vl_error *err);
VL_API vl_status vl_client_recv(vl_client *c, uint64_t *id, cJSON **result, vl_buf *out_payload,
                                vl_error *err);
/* The same with JSON text instead of trees, for callers that pass text on or look at little of
 * it: vl_client_send_text sends params (one JSON object, params_len bytes, put in the request
 * as is; the daemon checks it). vl_client_recv_text checks the whole response as strictly as
 * vl_client_recv does, without building a tree, and hands over the result's JSON text in
 * *result (NUL-terminated, *result_len bytes; the caller frees it with free()); after an error
 * response, as vl_client_recv's, *result is NULL. */
VL_API vl_status vl_client_send_text(vl_client *c, uint64_t id, const char *method,
                                     const char *params, size_t params_len, const uint8_t *payload,
                                     size_t payload_len, vl_error *err);
VL_API vl_status vl_client_recv_text(vl_client *c, uint64_t *id, char **result, size_t *result_len,
                                     vl_buf *out_payload, vl_error *err);
/* Corking, for pipelining clients: while on, requests sent are queued in the client (64 KiB)
 * and written together when the queue is full, when the client is about to read from the
 * socket (a receive or call never waits for the answer to a request still queued), when
 * corking is turned off, or at vl_client_close (within the timeout; a second when there is
 * none). A pipeline of small requests then costs one write per batch instead of one per
 * request. Turning it off sends what is queued (a transport error then, as a send's). Off by
 * default: a request is written before vl_client_send returns. */
VL_API vl_status vl_client_cork(vl_client *c, bool on, vl_error *err);

/* Convenience calls, thin wrappers of vl_client_call (docs/protocol.md, "Methods"). */
VL_API vl_status vl_client_ping(vl_client *c, vl_error *err);
/* *version: a copy of the daemon's version string, caller frees with free(). */
VL_API vl_status vl_client_version(vl_client *c, char **version, vl_error *err);
/* {"graph": graph, "options": options?} -> {"graph","report"} */
VL_API vl_status vl_client_lower(vl_client *c, const cJSON *graph, const cJSON *options,
                                 cJSON **result, vl_error *err);
/* {"graph","inputs","encoding"?} -> {"outputs"}; binary outputs go to out_payload. */
VL_API vl_status vl_client_execute(vl_client *c, const cJSON *graph, const cJSON *inputs,
                                   const char *encoding, const uint8_t *payload, size_t payload_len,
                                   cJSON **result, vl_buf *out_payload, vl_error *err);
/* {"graph","options"?,"inputs"?,"seed"?} -> {"equal","report","mismatches"}; seed < 0: none. */
VL_API vl_status vl_client_verify(vl_client *c, const cJSON *graph, const cJSON *options,
                                  const cJSON *inputs, int64_t seed, cJSON **result, vl_error *err);
/* {"input","size","out_dim_order"?,"encoding"?} -> {"output"}. params is the whole object. */
VL_API vl_status vl_client_view_copy(vl_client *c, const cJSON *params, const uint8_t *payload,
                                     size_t payload_len, cJSON **result, vl_buf *out_payload,
                                     vl_error *err);
/* The daemon's counters. */
VL_API vl_status vl_client_stats(vl_client *c, cJSON **result, vl_error *err);

#ifdef __cplusplus
}
#endif
#endif
