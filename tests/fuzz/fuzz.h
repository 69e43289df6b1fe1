/* fuzz.h - shared by the libFuzzer harnesses of tests/fuzz and their replay driver.
 *
 * Each harness defines LLVMFuzzerTestOneInput and checks real oracles (round trips, bit-exact
 * comparisons, error invariants) with FUZZ_CHECK, which prints the failed condition and
 * aborts so that libFuzzer (or the replay ctest) reports the input. Limits are small, so no
 * input can make the core allocate more than a few MiB. */
#ifndef VIEWLOWER_FUZZ_H
#define VIEWLOWER_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "viewlower/status.h"
#include "viewlower/tensor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: fuzz oracle failed: %s\n", __FILE__, __LINE__, #cond);               \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

/* Limits used by every harness: 4096 nodes, 256 KiB per tensor, 2 MiB per execution. */
static inline void fuzz_limits(vl_limits *lim) {
  vl_limits_default(lim);
  lim->max_nodes = 4096;
  lim->max_tensor_bytes = (int64_t)256 << 10;
  lim->max_total_bytes = (int64_t)2 << 20;
  lim->max_name_len = 256;
}

/* Is s valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF)? Everything
 * the core prints travels as JSON, which must be UTF-8. */
static inline int fuzz_utf8_valid(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    unsigned n = *p < 0x80 ? 0 : *p >= 0xF0 ? 3 : *p >= 0xE0 ? 2 : *p >= 0xC0 ? 1 : 9;
    if (n == 9 || *p > 0xF4) return 0;
    unsigned long cp = *p & (0x7Fu >> (n ? n + 1 : 0));
    for (unsigned k = 1; k <= n; k++) {
      if ((p[k] & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (p[k] & 0x3Fu);
    }
    static const unsigned long min_cp[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    p += n + 1;
  }
  return 1;
}

/* An error must be well formed: the returned status, a pointer that is empty or starts with
 * '/', a non-empty message of one line of UTF-8. */
static inline void fuzz_check_error(vl_status st, const vl_error *err) {
  FUZZ_CHECK(st != VL_OK && st < VL_STATUS_COUNT);
  FUZZ_CHECK(err->code == st);
  FUZZ_CHECK(err->path[0] == '\0' || err->path[0] == '/');
  FUZZ_CHECK(err->message[0] != '\0');
  for (const char *c = err->message; *c; c++) FUZZ_CHECK(*c != '\n');
  FUZZ_CHECK(fuzz_utf8_valid(err->message) && fuzz_utf8_valid(err->path));
}

#endif
