/* fuzz_verify.c - libFuzzer harness: verify params {"graph","inputs"?,"seed"?,"options"?} ->
 * vl_service_call("verify") under small limits (so no input can allocate more than a few MiB).
 *
 * Oracles: the safe policy never changes a value, so a successful verify without
 * "policy": "legacy" must report equal = true with no mismatches; the report's counts add up;
 * the result prints and parses back; every error is well formed. */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "viewlower/service.h"

static bool asks_legacy(const cJSON *params) {
  const cJSON *o = cJSON_GetObjectItemCaseSensitive(params, "options");
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "policy");
  return cJSON_IsString(p) && strcmp(p->valuestring, "legacy") == 0;
}

static double number_at(const cJSON *obj, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  FUZZ_CHECK(cJSON_IsNumber(v));
  return v->valuedouble;
}

static void check_result(const cJSON *params, const cJSON *res) {
  const cJSON *equal = cJSON_GetObjectItemCaseSensitive(res, "equal");
  const cJSON *mism = cJSON_GetObjectItemCaseSensitive(res, "mismatches");
  const cJSON *rep = cJSON_GetObjectItemCaseSensitive(res, "report");
  FUZZ_CHECK(cJSON_IsBool(equal) && cJSON_IsArray(mism) && cJSON_IsObject(rep));
  FUZZ_CHECK(cJSON_IsTrue(equal) == (cJSON_GetArraySize(mism) == 0));
  if (!asks_legacy(params) && !cJSON_IsTrue(equal)) {
    char *text = cJSON_PrintUnformatted(res);
    fprintf(stderr, "the safe lowering changed a value: %s\n", text ? text : "");
    free(text);
  }
  FUZZ_CHECK(asks_legacy(params) || cJSON_IsTrue(equal));
  FUZZ_CHECK(number_at(rep, "replaced") + number_at(rep, "kept") + number_at(rep, "merged") +
                 number_at(rep, "removed_dead") ==
             number_at(rep, "layout_copy_nodes"));
  char *text = cJSON_PrintUnformatted(res);
  FUZZ_CHECK(text != NULL);
  cJSON *back = cJSON_Parse(text);
  FUZZ_CHECK(back != NULL);
  cJSON_Delete(back);
  free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  cJSON *params = cJSON_ParseWithLength((const char *)data, size);
  if (params == NULL) return 0;
  vl_limits lim;
  fuzz_limits(&lim);
  lim.max_nodes = 256;
  cJSON *res = NULL;
  vl_buf out = {0};
  vl_call_stats stats;
  vl_error err;
  vl_error_clear(&err);
  vl_status st = vl_service_call("verify", params, NULL, 0, &lim, &res, &out, &stats, &err);
  if (st == VL_OK) {
    check_result(params, res);
    FUZZ_CHECK(out.len == 0);
  } else {
    fuzz_check_error(st, &err);
    FUZZ_CHECK(res == NULL);
  }
  cJSON_Delete(res);
  vl_buf_free(&out);
  cJSON_Delete(params);
  return 0;
}
