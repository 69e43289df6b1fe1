/* envelope.h - the JSON-RPC 2.0 envelope (docs/protocol.md) for both ends (internal): the daemon
 * reads requests and prints responses, the client prints requests and reads responses, each held to
 * the same strict rules; one status <-> wire code map. Pure functions, safe on any thread.
 *
 * Strict both ways: one JSON value (vl__json_parse_one: RFC 8259, no \u0000 escape, nothing
 * after the value), an object, no member twice (cJSON keeps duplicates and reads the first; a
 * proxy that reads the last would see another message), no member outside the envelope, string
 * ids and methods valid UTF-8 (an id is echoed into the response, which must stay JSON). */
#ifndef VIEWLOWER_WIRE_ENVELOPE_H
#define VIEWLOWER_WIRE_ENVELOPE_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "viewlower/status.h"

/* ---- requests (daemon side) ---------------------------------------------------------------- */

/* A checked request. doc owns the tree, id is the request's id as responses print it (owned:
 * a copied string, or a raw item holding a number's exact text); id is NULL for id null and
 * when the id could not be read (then responses carry id null). params is NULL when absent or
 * null. */
typedef struct vl__rpc_request {
  cJSON *doc;
  cJSON *id;
  const char *method;
  const cJSON *params;
  /* vl__rpc_request_scan only: the entries of params.graph.nodes when that is an array, else
   * -1 (params.graph is then a raw item: the member's text, see vl_service_call) */
  long graph_nodes;
  /* vl__rpc_request_scan only: the request text, when params.graph borrows it, and the byte
   * at text[cut] the scan replaced with the graph's terminating NUL (put back on free) */
  char *text;
  size_t cut;
  char cut_byte;
} vl__rpc_request;

/* Parses json[0..len) and checks the envelope: one JSON value, an object (an array is a refused
 * batch) with "jsonrpc":"2.0", an "id" that is a string of valid UTF-8, null or a number finite
 * as a double, a string "method" of valid UTF-8, and "params" an object when present; each at
 * most once, nothing else. VL_ERR_PARSE for bad JSON, VL_ERR_INVALID_REQUEST for a bad envelope,
 * VL_ERR_INVALID_PARAMS for non-object params. A numeric id is echoed as an integer when it is
 * whole and within +-2^53, else as the shortest of %.15g/%.16g/%.17g that reads back to the
 * same double. A duplicated or unreadable id leaves req->id NULL (the answer carries id null).
 * req->doc and req->id are set as far as they could be read, also on failure; release with
 * vl__rpc_request_free. */
vl_status vl__rpc_request_parse(const char *json, size_t len, vl__rpc_request *req, vl_error *err);
void vl__rpc_request_free(vl__rpc_request *req);

/* The same request read without a tree of its graph, for small requests whose work is mostly
 * reading and printing: one pass of the streaming reader (base/json_read.h) over the text; the
 * member "graph" of params is kept as a cJSON raw item holding its exact text (which the
 * service reads with the graph parser, as vl_graph_from_json would read its tree), every other
 * member of params and the id are parsed from their own text by vl__json_parse_one, so they
 * are the trees vl__rpc_request_parse gives. True when the request is well formed and was
 * read so; false (req zeroed) for anything else, including every error and out of memory:
 * the caller then calls vl__rpc_request_parse, whose errors are the ones to send. The raw
 * graph borrows json's own bytes, so the scan costs no copy of the graph: on success json must
 * outlive every use of the graph, and the byte after the graph's text is a NUL until
 * vl__rpc_request_restore puts it back (vl__rpc_request_free never touches json, which may be
 * gone by then). */
bool vl__rpc_request_scan(char *json, size_t len, vl__rpc_request *req);
/* Did a scanned request leave nothing unchecked that the strict reader could refuse: no raw
 * graph, or a graph text that is one strictly valid JSON value (checked now, by the streaming
 * reader without a tape or tree)? Then the strict reader would give the scan's trees, and the
 * graph parser already answers a text as it answers its tree (vl_service_call), so a failed
 * call needs no second reading. */
bool vl__rpc_request_graph_checked(const vl__rpc_request *req);
/* Puts back the byte of a scanned request's text that ends its graph, for a caller that reads
 * the text again; the raw graph is unterminated after it, so free req next. No-op otherwise. */
void vl__rpc_request_restore(vl__rpc_request *req);

/* The top-level "id" of a request text as vl__rpc_request_parse would echo it, found without
 * parsing the rest: lets the loop refuse a large request (overloaded) with its id. One pass
 * over at most len bytes that allocates nothing and stops at the id's value; only that value
 * is parsed. NULL when the text is not an object, has no top-level id before it ends or turns
 * malformed, the id is not a valid one (or is null), or its value reaches the end of the text
 * (so the start of a text still arriving gives its id only once that is whole); free with
 * cJSON_Delete. */
cJSON *vl__rpc_peek_id(const char *json, size_t len);

/* ---- responses (daemon side) --------------------------------------------------------------- */

/* {"jsonrpc":"2.0","id":id,"result":result}; takes result (even on failure). NULL id prints
 * null. Returns malloc'd text (*len its length) or NULL on out-of-memory. */
char *vl__rpc_result_text(const cJSON *id, cJSON *result, size_t *len);
/* {"jsonrpc":"2.0","id":id,"error":{"code","message","data":{"kind","path"?}}}; the message
 * is err->message (or the status text when empty), data.path is present when err->path is
 * non-empty. Returns malloc'd text or NULL on out-of-memory. */
char *vl__rpc_error_text(const cJSON *id, const vl_error *err, size_t *len);

/* The response sent when not even an error response can be allocated (id null). */
extern const char vl__rpc_nomem_response[];
extern const size_t vl__rpc_nomem_response_len;

/* ---- the client side ------------------------------------------------------------------------ */

/* {"jsonrpc":"2.0","id":id,"method":method,"params":params or {}} as unformatted text, the id
 * as exact integer digits and params' numbers as their own text; NULL on out-of-memory. */
char *vl__rpc_request_text(uint64_t id, const char *method, const cJSON *params, size_t *len);

/* The same with params given as text (one JSON object, put in as is). */
char *vl__rpc_request_text_raw(uint64_t id, const char *method, const char *params,
                               size_t params_len, size_t *len);

/* A result response read without a tree: the strict reader (base/json_read.h) over the whole
 * text, which must be {"jsonrpc":"2.0","id":null or a whole number in 0..2^53,"result":any},
 * each once and nothing else. True with the id and the span of the result's text; false for
 * anything else (an error response, a malformed one): vl__rpc_response_parse then says which. */
bool vl__rpc_response_scan(const char *json, size_t len, bool *id_null, uint64_t *id,
                           size_t *result_off, size_t *result_len);

/* A response read by vl__rpc_response_parse. */
typedef struct vl__rpc_response {
  cJSON *doc;      /* the whole response (owned) */
  bool id_null;    /* the id was null */
  uint64_t id;     /* else a whole number in 0..2^53 */
  cJSON *result;   /* inside doc; NULL for an error response */
  vl_status error; /* VL_OK, or the status of an error response (see vl__rpc_status_of) */
} vl__rpc_response;

/* Parses and checks a response: one JSON value, an object with "jsonrpc":"2.0", an "id" that is
 * null or a whole number in 0..2^53, exactly one of "result" and "error", each once and nothing
 * else; an error is {"code": integer, "message": string, "data"?: {"kind": string, "path"?:
 * string, ...}} with no member twice. An error response sets resp->error and fills err with the
 * server's message and path (returns VL_OK: the envelope was fine). VL_ERR_PROTOCOL, with err
 * saying what is wrong, for anything malformed; VL_ERR_NOMEM. Free with vl__rpc_response_free. */
vl_status vl__rpc_response_parse(const char *json, size_t len, vl__rpc_response *resp,
                                 vl_error *err);
void vl__rpc_response_free(vl__rpc_response *resp);

/* The status an error response stands for: its data.kind when that names a status the server
 * sends, else the first such status with its code (VL_ERR_INTERNAL when none has it). The one
 * inverse of vl_status_rpc_code / vl_status_kind; transport statuses (io, timeout, protocol)
 * are never taken from the wire. */
vl_status vl__rpc_status_of(int code, const char *kind);
/* Statuses of the client's own transport: never read from a response. */
bool vl__rpc_is_transport_status(vl_status s);

#endif
