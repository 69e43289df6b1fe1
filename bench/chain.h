/* chain.h - the chain graphs the benchmark feeds the daemon and the planner: a placeholder n0
 * of the given shape, then calls n1 .. n<calls>, each target(previous, more_args...) of that
 * shape, and the output of the last. NULL when out of memory; free() the text. */
#ifndef VL_BENCH_CHAIN_H
#define VL_BENCH_CHAIN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* more_args: JSON after the reference, with its leading comma ("" for none, ",[1,0]"). */
static inline char *vl_bench_chain(int calls, const char *target, const char *more_args,
                                   const char *shape) {
  /* a call is ~100 bytes of keys, two names of at most 11 digits each, and the strings */
  size_t per = 160 + strlen(target) + strlen(more_args) + strlen(shape);
  size_t cap = (size_t)(calls + 2) * per + 256, len = 0;
  char *t = malloc(cap);
  if (t == NULL) return NULL;
  len += (size_t)snprintf(t + len, cap - len,
                          "{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":[{\"name\":"
                          "\"n0\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\","
                          "\"shape\":%s}}",
                          shape);
  for (int i = 1; i <= calls && len < cap; i++) {
    len += (size_t)snprintf(t + len, cap - len,
                            ",{\"name\":\"n%d\",\"op\":\"call_function\",\"target\":\"%s\","
                            "\"args\":[\"n%d\"%s],\"val\":{\"dtype\":\"float32\",\"shape\":%s}}",
                            i, target, i - 1, more_args, shape);
  }
  if (len >= cap) { /* cannot happen with the size above; never write past the buffer */
    free(t);
    return NULL;
  }
  snprintf(t + len, cap - len, ",{\"name\":\"out\",\"op\":\"output\",\"args\":[\"n%d\"]}]}", calls);
  return t;
}

#endif
