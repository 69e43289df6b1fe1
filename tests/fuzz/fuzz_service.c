/* fuzz_service.c - libFuzzer harness: vl_service_call with an arbitrary params document for
 * every method (and for names that are not methods).
 *
 * Input: byte 0 picks the method, byte 1 is the length L of a binary payload taken from the
 * end of the input ("blob" tensors point into it), the bytes between are the params JSON.
 * Oracles: unknown methods fail as unknown_method, non-object params as invalid_params, both
 * with an empty pointer; every other error is well formed; a result is an object that prints
 * and parses back; a second identical call gives the same bytes (no uninitialised reads or
 * hidden state); the daemon's lending call (vl__service_call_lending) gives the same outcome
 * byte for byte, lends whenever vl__service_lends says it will (and otherwise only a bool
 * input, whose bytes it checks first), and a lent payload lies inside the request's. */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "viewlower/service.h"
#include "wire/service_internal.h"

static const char *const methods[] = {"ping",   "version",   "validate", "lower", "execute",
                                      "verify", "view_copy", "stats",    "",      "lower\x01"};
#define N_METHODS (sizeof methods / sizeof *methods)

typedef struct {
  vl_status st;
  vl_error err;
  char *text; /* printed result, NULL on error */
  vl_buf payload;
} outcome;

/* the fuzzers' limits, with graphs kept small */
static void service_limits(vl_limits *lim) {
  fuzz_limits(lim);
  lim->max_nodes = 256;
}

/* params.input.dtype is "bool". */
static bool input_is_bool(const cJSON *params) {
  const cJSON *in = cJSON_GetObjectItemCaseSensitive(params, "input");
  const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(in, "dtype");
  return cJSON_IsString(dtype) && strcmp(dtype->valuestring, "bool") == 0;
}

static void call(const char *method, const cJSON *params, const uint8_t *payload, size_t len,
                 bool lending, outcome *o) {
  vl_limits lim;
  service_limits(&lim);
  cJSON *res = NULL;
  vl_call_stats stats;
  memset(o, 0, sizeof *o);
  vl_error_clear(&o->err);
  o->st = lending ? vl__service_call_lending(method, params, payload, len, &lim, 0, &res,
                                             &o->payload, &stats, &o->err)
                  : vl_service_call(method, params, payload, len, &lim, &res, &o->payload, &stats,
                                    &o->err);
  if (o->st != VL_OK) {
    fuzz_check_error(o->st, &o->err);
    FUZZ_CHECK(res == NULL);
    return;
  }
  FUZZ_CHECK(cJSON_IsObject(res));
  o->text = cJSON_PrintUnformatted(res);
  FUZZ_CHECK(o->text != NULL);
  FUZZ_CHECK(fuzz_utf8_valid(o->text));
  cJSON *back = cJSON_Parse(o->text);
  FUZZ_CHECK(back != NULL);
  cJSON_Delete(back);
  cJSON_Delete(res);
}

/* a lent payload (cap 0) is the request's bytes: not freed here */
static bool lent(const outcome *o) {
  return o->payload.data != NULL && o->payload.cap == 0;
}

static void release(outcome *o) {
  free(o->text);
  if (!lent(o)) vl_buf_free(&o->payload);
}

static void check_same(const outcome *a, const outcome *b) {
  FUZZ_CHECK(a->st == b->st);
  FUZZ_CHECK(strcmp(a->err.path, b->err.path) == 0 && strcmp(a->err.message, b->err.message) == 0);
  FUZZ_CHECK((a->text == NULL) == (b->text == NULL));
  FUZZ_CHECK(a->text == NULL || strcmp(a->text, b->text) == 0);
  FUZZ_CHECK(a->payload.len == b->payload.len);
  FUZZ_CHECK(a->payload.len == 0 || memcmp(a->payload.data, b->payload.data, a->payload.len) == 0);
}

static void check_expected_failures(const char *method, const cJSON *params, const outcome *o) {
  if (!vl_service_has_method(method)) {
    FUZZ_CHECK(o->st == VL_ERR_UNKNOWN_METHOD && o->err.path[0] == '\0');
  } else if (params != NULL && !cJSON_IsObject(params) && !cJSON_IsNull(params)) {
    FUZZ_CHECK(o->st == VL_ERR_INVALID_PARAMS && o->err.path[0] == '\0');
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  const char *method = methods[data[0] % N_METHODS];
  size_t plen = data[1] <= size - 2 ? data[1] : size - 2;
  const uint8_t *payload = data + size - plen;
  size_t json_len = size - 2 - plen;
  cJSON *params = NULL;
  if (json_len > 0) {
    params = cJSON_ParseWithLength((const char *)data + 2, json_len);
    if (params == NULL) return 0;
  }
  outcome a, b, c;
  call(method, params, plen ? payload : NULL, plen, false, &a);
  check_expected_failures(method, params, &a);
  FUZZ_CHECK(!lent(&a));
  call(method, params, plen ? payload : NULL, plen, false, &b);
  check_same(&a, &b);
  vl_limits lim;
  service_limits(&lim);
  bool lends = vl__service_lends(method, params, plen ? payload : NULL, plen, &lim);
  call(method, params, plen ? payload : NULL, plen, true, &c);
  check_same(&a, &c);
  /* lends: lent without reading the payload; a bool blob is lent only after its bytes are
   * checked, so vl__service_lends says no to it (the daemon runs it on a worker) */
  FUZZ_CHECK(!lends || lent(&c));
  FUZZ_CHECK(lends || !lent(&c) || input_is_bool(params));
  FUZZ_CHECK(!lent(&c) || (c.payload.data >= payload && c.payload.len <= plen &&
                           c.payload.data + c.payload.len <= payload + plen));
  release(&a);
  release(&b);
  release(&c);
  cJSON_Delete(params);
  return 0;
}
