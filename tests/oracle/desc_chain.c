/* desc_chain.c - the C side of the descriptor oracle (tests/oracle/desc_oracle.py): reads one
 * chain per line, {"shape", "strides", "offset", "ops": [[name, args...], ...]}, applies the
 * layout module's maps (viewlower/layout.h) in order and prints, per line, the descriptor after
 * each op ({"shape","strides","offset"}) as a JSON array, ending with null at the first map
 * that fails. Integers >= 2^63 (INT64_MAX read through a double) are INT64_MAX. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "viewlower/layout.h"

static int64_t num(const cJSON *j) {
  double v = j ? j->valuedouble : 0;
  if (v >= 9.2e18) return INT64_MAX;
  if (v <= -9.2e18) return INT64_MIN;
  return (int64_t)v;
}

static size_t list(const cJSON *j, int64_t *v) {
  size_t n = 0;
  const cJSON *c;
  cJSON_ArrayForEach(c, j) if (n < VL_MAX_RANK) v[n++] = num(c);
  return n;
}

static bool apply(const cJSON *op, vl_desc *d) {
  const char *name = cJSON_GetArrayItem(op, 0)->valuestring;
  const cJSON *a1 = cJSON_GetArrayItem(op, 1), *a2 = cJSON_GetArrayItem(op, 2);
  const cJSON *a3 = cJSON_GetArrayItem(op, 3), *a4 = cJSON_GetArrayItem(op, 4);
  int64_t v[VL_MAX_RANK], w[VL_MAX_RANK];
  size_t n;
  if (strcmp(name, "reshape") == 0) {
    n = list(a1, v);
    return vl_desc_reshape(d, (uint8_t)n, v, d);
  }
  if (strcmp(name, "permute") == 0) {
    n = list(a1, v);
    return vl_desc_permute(d, v, n, d);
  }
  if (strcmp(name, "transpose") == 0) return vl_desc_transpose(d, num(a1), num(a2), d);
  if (strcmp(name, "t") == 0) return vl_desc_t(d, d);
  if (strcmp(name, "squeeze") == 0) {
    if (a1 == NULL) return vl_desc_squeeze(d, NULL, 0, d);
    n = list(a1, v);
    return vl_desc_squeeze(d, v, n, d);
  }
  if (strcmp(name, "unsqueeze") == 0) return vl_desc_unsqueeze(d, num(a1), d);
  if (strcmp(name, "slice") == 0) {
    int64_t s = num(a2), e = num(a3);
    return vl_desc_slice(d, num(a1), cJSON_IsNull(a2) ? NULL : &s, cJSON_IsNull(a3) ? NULL : &e,
                         num(a4), d);
  }
  if (strcmp(name, "select") == 0) return vl_desc_select(d, num(a1), num(a2), d);
  if (strcmp(name, "alias") == 0) return vl_desc_identity(d, d);
  if (strcmp(name, "as_strided") == 0) {
    n = list(a1, v);
    if (list(a2, w) != n) return false;
    return vl_desc_as_strided(d, (uint8_t)n, v, w, num(a3), d);
  }
  fprintf(stderr, "desc_chain: unknown op %s\n", name);
  exit(2);
}

static cJSON *ints(const int64_t *v, uint8_t n) {
  cJSON *a = cJSON_CreateArray();
  for (uint8_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
  return a;
}

int main(void) {
  static char line[1 << 20];
  while (fgets(line, sizeof line, stdin)) {
    cJSON *chain = cJSON_Parse(line), *out = cJSON_CreateArray();
    if (chain == NULL) {
      fprintf(stderr, "desc_chain: bad line\n");
      return 2;
    }
    vl_desc d = {0};
    int64_t strides[VL_MAX_RANK];
    d.rank = (uint8_t)list(cJSON_GetObjectItem(chain, "shape"), d.shape);
    list(cJSON_GetObjectItem(chain, "strides"), strides);
    memcpy(d.strides, strides, sizeof strides);
    d.offset = num(cJSON_GetObjectItem(chain, "offset"));
    const cJSON *op;
    cJSON_ArrayForEach(op, cJSON_GetObjectItem(chain, "ops")) {
      if (!apply(op, &d)) {
        cJSON_AddItemToArray(out, cJSON_CreateNull());
        break;
      }
      cJSON *o = cJSON_CreateObject();
      cJSON_AddItemToObject(o, "shape", ints(d.shape, d.rank));
      cJSON_AddItemToObject(o, "strides", ints(d.strides, d.rank));
      cJSON_AddNumberToObject(o, "offset", (double)d.offset);
      cJSON_AddItemToArray(out, o);
    }
    char *text = cJSON_PrintUnformatted(out);
    puts(text);
    free(text);
    cJSON_Delete(out);
    cJSON_Delete(chain);
  }
  return 0;
}
