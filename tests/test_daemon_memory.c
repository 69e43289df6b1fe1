/* test_daemon_memory.c - the daemon's allocator wrappers (daemon/memory.c), linked with the
 * same -Wl,--wrap options as viewlowerd: the loop's block cache serves malloc, calloc (zeroed)
 * and growing realloc, and the budget's guard refuses what would pass the budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "memory.h"

static int setup(void **state) {
  (void)state;
  vld_mem_cache_begin();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  vld_mem_cache_end();
  return 0;
}

static bool all_zero(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (p[i] != 0) {
      return false;
    }
  }
  return true;
}

/* A block freed dirty comes back from calloc zeroed: from the cache where it is on, the same
 * block (the last one kept of its size) for sizes the cache is filled with when it begins (up
 * to 520 bytes); a larger first block comes from glibc, whose block may be kept in a larger
 * size's list. */
static void calloc_from_the_cache_is_zeroed(void **state) {
  (void)state;
  for (size_t n = 1; n <= 4000; n = n * 3 + 1) {
    unsigned char *p = malloc(n);
    assert_non_null(p);
    memset(p, 0xA5, n);
    free(p);
    unsigned char *q = calloc(1, n);
    assert_non_null(q);
    if (VLD_MEM_CACHE_ON && n <= 520) {
      assert_ptr_equal(q, p);
    }
    assert_true(all_zero(q, n));
    free(q);
  }
  /* as count × size too */
  unsigned char *p = malloc(600);
  assert_non_null(p);
  memset(p, 0xFF, 600);
  free(p);
  unsigned char *q = calloc(25, 24);
  assert_non_null(q);
  assert_true(all_zero(q, 600));
  free(q);
}

static void calloc_overflow_is_refused(void **state) {
  (void)state;
  volatile size_t half = SIZE_MAX / 2; /* volatile: the compiler would refuse the constant */
  assert_null(calloc(half, 3));
  assert_null(calloc(3, half));
}

/* A cached block that grows through realloc keeps its bytes. */
static void realloc_keeps_the_bytes(void **state) {
  (void)state;
  unsigned char *p = malloc(40);
  assert_non_null(p);
  for (size_t i = 0; i < 40; i++) {
    p[i] = (unsigned char)i;
  }
  for (size_t n = 64; n <= 8192; n *= 2) {
    p = realloc(p, n);
    assert_non_null(p);
    for (size_t i = 0; i < 40; i++) {
      assert_int_equal(p[i], i);
    }
  }
  free(p);
}

/* Under the guard, a calloc past the budget fails and the guard says so. */
static void guard_refuses_calloc_past_the_budget(void **state) {
  (void)state;
  size_t n = (size_t)(vld_mem_budget() - vld_mem_in_use()) + ((size_t)1 << 20);
  vld_mem_guard_begin();
  void *p = calloc(1, n);
  bool refused = vld_mem_guard_end();
  assert_null(p);
  assert_true(refused);
  vld_mem_guard_begin();
  p = calloc(1, 100);
  refused = vld_mem_guard_end();
  assert_non_null(p);
  assert_false(refused);
  free(p);
}

int main(void) {
  vld_mem_init(64u << 20);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(calloc_from_the_cache_is_zeroed, setup, teardown),
      cmocka_unit_test_setup_teardown(calloc_overflow_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(realloc_keeps_the_bytes, setup, teardown),
      cmocka_unit_test(guard_refuses_calloc_past_the_budget),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
