/* budget.h - how many random cases a test runs in the build it was compiled in.
 *
 * A test states its count for the optimised build; vl_test_cases scales it by
 * VL_TEST_CASE_PERCENT, which tests/CMakeLists.txt defines for every test program: 100 in the
 * optimised build, less under the sanitizers, where each case costs 5 to 10 times as much (the
 * count is sized so that the test takes about as long as in the optimised build, and its
 * TIMEOUT holds on a busy machine). The variable VL_TEST_CASE_PERCENT in the environment
 * overrides it for one run: VL_TEST_CASE_PERCENT=100 runs the full count under ASan too, 1000
 * ten times as many. Never fewer than one case. */
#ifndef VIEWLOWER_TEST_BUDGET_H
#define VIEWLOWER_TEST_BUDGET_H

#include <stdint.h>
#include <stdlib.h>

#ifndef VL_TEST_CASE_PERCENT
#define VL_TEST_CASE_PERCENT 100
#endif

static inline uint64_t vl_test_cases(uint64_t optimised) {
  uint64_t percent = VL_TEST_CASE_PERCENT;
  const char *env = getenv("VL_TEST_CASE_PERCENT");
  if (env != NULL && *env != '\0') percent = strtoull(env, NULL, 10);
  uint64_t n = optimised * percent / 100;
  return n > 0 ? n : 1;
}

#endif
