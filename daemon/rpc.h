/* rpc.h - JSON-RPC 2.0 envelopes of the daemon (SPEC §6): checking a request and printing
 * result and error responses. Pure functions, safe on worker threads. */
#ifndef VIEWLOWERD_RPC_H
#define VIEWLOWERD_RPC_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "viewlower/status.h"

/* A checked request. doc owns the tree, id is the request's id as responses print it (owned:
 * a copied string, or a raw item holding a number's exact text); id is NULL for id null and
 * when the id could not be read (then responses carry id null). params is NULL when absent or
 * null. */
typedef struct vl_rpc_request {
  cJSON *doc;
  cJSON *id;
  const char *method;
  const cJSON *params;
} vl_rpc_request;

/* Parses json[0..len) and checks the envelope: one JSON value with nothing but JSON whitespace
 * after it, an object (an array is a refused batch) with "jsonrpc":"2.0", an "id" that is a
 * string, null or a number finite as a double, a string "method", and "params" an object when
 * present. VL_ERR_PARSE for bad JSON, VL_ERR_INVALID_REQUEST for a bad envelope,
 * VL_ERR_INVALID_PARAMS for non-object params. A numeric id is echoed as an integer when it is
 * whole and within +-2^53, else as the shortest of %.15g/%.16g/%.17g that reads back to the
 * same double. req->doc and req->id are set as far as they could be read, also on failure;
 * release with vl_rpc_request_free. */
vl_status vl_rpc_request_parse(const char *json, size_t len, vl_rpc_request *req, vl_error *err);
void vl_rpc_request_free(vl_rpc_request *req);

/* {"jsonrpc":"2.0","id":id,"result":result}; takes result (even on failure). NULL id prints
 * null. Returns malloc'd text (*len its length) or NULL on out-of-memory. */
char *vl_rpc_result_text(const cJSON *id, cJSON *result, size_t *len);
/* {"jsonrpc":"2.0","id":id,"error":{"code","message","data":{"kind","path"?}}}; the message
 * is err->message (or the status text when empty), data.path is present when err->path is
 * non-empty. Returns malloc'd text or NULL on out-of-memory. */
char *vl_rpc_error_text(const cJSON *id, const vl_error *err, size_t *len);

/* The top-level "id" of a request text as vl_rpc_request_parse would echo it, found without
 * parsing the rest: lets the loop refuse a large request (overloaded) with its id. One pass
 * over at most len bytes that allocates nothing and stops at the id's value; only that value
 * is parsed. NULL when the text is not an object, has no top-level id before it ends or turns
 * malformed, or the id is not a valid one (or is null); free with cJSON_Delete. */
cJSON *vl_rpc_peek_id(const char *json, size_t len);

/* The response sent when not even an error response can be allocated (id null). */
extern const char vl_rpc_nomem_response[];
extern const size_t vl_rpc_nomem_response_len;

#endif
