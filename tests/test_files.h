/* test_files.h - a whole file read into a NUL-terminated block, for the unit tests that load
 * graphs from examples/ and tests/data (include after <cmocka.h>; a missing file fails the
 * test). */
#ifndef VL_TEST_FILES_H
#define VL_TEST_FILES_H

#include <stdio.h>
#include <stdlib.h>

static inline char *vl_test_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  assert_true(n >= 0);
  char *b = malloc((size_t)n + 1);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  b[n] = '\0';
  *len = (size_t)n;
  return b;
}

#endif
