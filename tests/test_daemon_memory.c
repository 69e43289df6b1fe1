/* test_daemon_memory.c - the daemon's allocator wrappers (daemon/memory.c), linked with the
 * same -Wl,--wrap options as viewlowerd: the loop's block cache serves malloc, calloc (zeroed)
 * and growing realloc, large blocks are kept for reuse within the budget, and the budget's
 * guard refuses what would pass the budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <malloc.h>

#include "memory.h"

/* AddressSanitizer's allocator is not glibc's heap: nothing there for malloc_trim to give back. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

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
  for (size_t n = 64; n <= 131072; n *= 2) { /* through the big classes and past them */
    p = realloc(p, n);
    assert_non_null(p);
    for (size_t i = 0; i < 40; i++) {
      assert_int_equal(p[i], i);
    }
  }
  free(p);
}

/* realloc(NULL, n) is malloc(n) and is served like it, from the cache: the block just freed
 * comes back (it went to glibc, and every growing buffer's first block took the heap's lock). */
static void realloc_of_null_comes_from_the_cache(void **state) {
  (void)state;
  unsigned char *p = malloc(200);
  assert_non_null(p);
  uintptr_t at = (uintptr_t)p;
  free(p);
  void *volatile none = NULL; /* a literal NULL: the compiler calls malloc itself */
  unsigned char *q = realloc(none, 200);
  assert_non_null(q);
  if (VLD_MEM_CACHE_ON) {
    assert_true((uintptr_t)q == at);
  }
  free(q);
}

/* Past 4 KiB the cache has classes of 8 to 64 KiB: a loop's block of 20 KiB is one of 32 KiB,
 * and serves the next request of 17 to 32 KiB; a block of twice the largest class or more is
 * not kept in it. */
static void big_classes_serve_blocks_of_their_size(void **state) {
  (void)state;
  unsigned char *p = malloc(20 << 10);
  assert_non_null(p);
  if (VLD_MEM_CACHE_ON) {
    assert_true(malloc_usable_size(p) >= 32 << 10);
  }
  memset(p, 0x5A, 20 << 10);
  uintptr_t at = (uintptr_t)p;
  free(p);
  unsigned char *q = calloc(1, 17 << 10);
  assert_non_null(q);
  if (VLD_MEM_CACHE_ON) {
    assert_true((uintptr_t)q == at);
  }
  assert_true(all_zero(q, 17 << 10));
  free(q);
  unsigned char *huge = malloc(2 << 20); /* a map of its own: unmapped when freed */
  assert_non_null(huge);
  uintptr_t huge_at = (uintptr_t)huge;
  free(huge);
  unsigned char *r = malloc(60 << 10);
  assert_non_null(r);
  assert_true((uintptr_t)r != huge_at);
  free(r);
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

#define MIB ((size_t)1 << 20)

/* What a block counts (memory.c): its usable bytes and glibc's header word. */
static uint64_t counted(void *p) {
  return malloc_usable_size(p) + sizeof(size_t);
}

/* A large block freed stays mapped, kept out of the bytes in use, and serves the next request
 * of its size (calloc zeroes it); a request it is far too large for, or too small for, gets a
 * block of its own. */
static void a_large_block_is_kept_and_reused(void **state) {
  (void)state;
  unsigned char *p = malloc(8 * MIB);
  assert_non_null(p);
  memset(p, 0xA5, 8 * MIB);
  uintptr_t at = (uintptr_t)p;
  uint64_t bytes = counted(p), before = vld_mem_in_use();
  free(p);
  assert_int_equal(vld_mem_in_use(), before - bytes);
  if (!VLD_MEM_CACHE_ON) {
    assert_int_equal(vld_mem_kept(), 0);
    return;
  }
  assert_int_equal(vld_mem_kept(), bytes);
  unsigned char *big = malloc(12 * MIB); /* the kept block is too small */
  assert_non_null(big);
  assert_true((uintptr_t)big != at);
  unsigned char *q = calloc(1, 7 * MIB); /* 8 MiB is within a quarter of 7 */
  assert_true((uintptr_t)q == at);
  assert_int_equal(vld_mem_kept(), 0);
  assert_true(all_zero(q, 7 * MIB));
  uintptr_t big_at = (uintptr_t)big;
  uint64_t big_bytes = counted(big);
  free(big);
  assert_int_equal(vld_mem_kept(), big_bytes);
  unsigned char *r = malloc(5 * MIB); /* 12 MiB is more than a quarter over 5 */
  assert_non_null(r);
  assert_true((uintptr_t)r != big_at);
  free(q);
  free(r);
  vld_mem_release_kept();
  assert_int_equal(vld_mem_kept(), 0);
}

/* A charge counts its bytes at once, in one step with the check (two loops admitting a frame
 * each, or a worker's copy beside a loop's frame, no longer take the same free bytes), and the
 * next allocation takes them as its own: counted once, not twice. A charge that does not fit
 * counts nothing; one that no block takes is given back when the next allocation returns. A
 * large block under the guard is charged the same way. */
static void a_charge_is_counted_once(void **state) {
  (void)state;
  vld_mem_release_kept();
  uint64_t before = vld_mem_in_use();
  assert_true(vld_mem_charge(8 * MIB));
  assert_int_equal(vld_mem_in_use(), before + 8 * MIB); /* counted ahead */
  assert_true(vld_mem_peak() >= before + 8 * MIB);
  unsigned char *p = malloc(8 * MIB);
  assert_non_null(p);
  assert_int_equal(vld_mem_in_use(), before + counted(p)); /* the block took the charge */
  free(p);
  vld_mem_release_kept();
  assert_int_equal(vld_mem_in_use(), before);
  assert_false(vld_mem_charge(vld_mem_budget() - before + 1));
  assert_int_equal(vld_mem_in_use(), before);
  assert_true(vld_mem_charge(8 * MIB));
  void *volatile big = malloc(16 * MIB); /* takes 8 MiB of the charge (volatile: kept) */
  assert_non_null(big);
  assert_int_equal(vld_mem_in_use(), before + counted(big));
  free(big);
  vld_mem_release_kept();
  assert_int_equal(vld_mem_in_use(), before);
  assert_true(vld_mem_charge(8 * MIB));
  void *volatile small = malloc(16); /* takes 24 bytes of it; the rest is given back */
  assert_non_null(small);
  free(small);
  assert_true(vld_mem_in_use() < before + 64 * 1024); /* within this thread's unshared batch */
  vld_mem_guard_begin();
  unsigned char *g = malloc(8 * MIB);
  bool refused = vld_mem_guard_end();
  assert_non_null(g);
  assert_false(refused);
  assert_int_equal(vld_mem_in_use(), before + counted(g));
  free(g);
  vld_mem_release_kept();
  assert_int_equal(vld_mem_in_use(), before);
}

/* aligned_alloc and posix_memalign take kept blocks too (the core's tensors are 64-byte
 * aligned: each large one was a fresh map, faulted in on every request), but only a block that
 * starts on the alignment asked: a malloc'd block kept 16 bytes past a page does not serve a
 * request for 64. */
static void a_large_aligned_block_is_kept_and_reused(void **state) {
  (void)state;
  unsigned char *p = aligned_alloc(64, 8 * MIB);
  assert_non_null(p);
  memset(p, 0xA5, 8 * MIB);
  uintptr_t at = (uintptr_t)p;
  uint64_t bytes = counted(p);
  free(p);
  if (VLD_MEM_CACHE_ON) {
    assert_int_equal(vld_mem_kept(), bytes);
  }
  void *q = NULL;
  assert_int_equal(posix_memalign(&q, 64, 7 * MIB), 0);
  assert_int_equal((uintptr_t)q % 64, 0);
  if (VLD_MEM_CACHE_ON) {
    assert_true((uintptr_t)q == at);
    assert_int_equal(vld_mem_kept(), 0);
  }
  free(q);
  vld_mem_release_kept();
  unsigned char *m = malloc(8 * MIB);
  assert_non_null(m);
  uintptr_t m_at = (uintptr_t)m;
  free(m);
  unsigned char *r = aligned_alloc(64, 7 * MIB);
  assert_non_null(r);
  assert_int_equal((uintptr_t)r % 64, 0);
  if (m_at % 64 != 0) {
    assert_true((uintptr_t)r != m_at);
  }
  free(r);
  vld_mem_release_kept();
  assert_int_equal(vld_mem_kept(), 0);
}

/* Kept bytes stay within a quarter of the 64 MiB budget (the oldest block makes way), and go
 * back to the system before a request would pass the budget with them. */
static void kept_blocks_stay_within_the_budget(void **state) {
  (void)state;
  void *b[3];
  for (int i = 0; i < 3; i++) {
    b[i] = malloc(7 * MIB);
    assert_non_null(b[i]);
  }
  uint64_t each = counted(b[0]);
  for (int i = 0; i < 3; i++) {
    free(b[i]);
    assert_true(vld_mem_kept() <= vld_mem_budget() / 4);
  }
  if (VLD_MEM_CACHE_ON) {
    assert_int_equal(vld_mem_kept(), 2 * each);
  }
  uint64_t room = vld_mem_budget() - vld_mem_in_use();
  assert_true(vld_mem_fits(room - MIB)); /* fits with nothing kept */
  assert_int_equal(vld_mem_kept(), 0);
  /* under the guard too: a block that fits only once the kept one is gone */
  void *k = malloc(7 * MIB);
  assert_non_null(k);
  free(k);
  room = vld_mem_budget() - vld_mem_in_use();
  vld_mem_guard_begin();
  void *p = malloc(room - 2 * MIB);
  bool refused = vld_mem_guard_end();
  assert_non_null(p);
  assert_false(refused);
  assert_int_equal(vld_mem_kept(), 0);
  free(p);
  vld_mem_release_kept();
}

/* Resident KiB of this process (VmRSS). */
static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    if (sscanf(line, "VmRSS: %ld", &kib) == 1) {
      break;
    }
  }
  if (f != NULL) {
    fclose(f);
  }
  return kib;
}

/* Heap pages freed in the middle of the heap stay resident until trimmed; near a full budget
 * they go back before more is counted beside them. 17 MiB of 512 KiB blocks freed below a live
 * one (free cannot shrink the heap past it), then three 20 MiB blocks (maps of their own: no
 * free chunk fits them) bring the 64 MiB budget's in-use bytes to 60 MiB: the hole must be
 * given back rather than stay resident beside them (it did: 60 MiB more resident, not 43), by
 * the worker whose allocation got there. */
static void freed_heap_pages_go_back_near_a_full_budget(void **state) {
  (void)state;
  enum { SMALL = 512 << 10, N_SMALL = 34, N_BIG = 3 };
  vld_mem_release_kept();
  vld_mem_trim();
  void *hole[N_SMALL + 1], *big[N_BIG];
  for (int i = 0; i <= N_SMALL; i++) {
    hole[i] = malloc(SMALL);
    assert_non_null(hole[i]);
    memset(hole[i], 0x5A, SMALL);
  }
  for (int i = 0; i < N_SMALL; i++) {
    free(hole[i]); /* hole[N_SMALL] stays, above them */
  }
  long before = rss_kib();
  vld_mem_guard_begin(); /* as a worker: an event loop never trims */
  for (int i = 0; i < N_BIG; i++) {
    big[i] = malloc(20 * MIB);
    assert_non_null(big[i]);
    memset(big[i], 0xA5, 20 * MIB);
  }
  assert_false(vld_mem_guard_end());
  long after = rss_kib();
  fprintf(stderr, "RSS %ld KiB with 17 MiB freed, %ld KiB with 60 MiB more in use\n", before,
          after);
#ifndef UNDER_ASAN
  assert_true(before > 0 && after - before < (long)(N_BIG * 20 - 12) * 1024);
#endif
  for (int i = 0; i < N_BIG; i++) {
    free(big[i]);
  }
  free(hole[N_SMALL]);
  vld_mem_release_kept();
}

int main(void) {
  vld_mem_init(64u << 20);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(calloc_from_the_cache_is_zeroed, setup, teardown),
      cmocka_unit_test_setup_teardown(calloc_overflow_is_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(realloc_keeps_the_bytes, setup, teardown),
      cmocka_unit_test_setup_teardown(realloc_of_null_comes_from_the_cache, setup, teardown),
      cmocka_unit_test_setup_teardown(big_classes_serve_blocks_of_their_size, setup, teardown),
      cmocka_unit_test(guard_refuses_calloc_past_the_budget),
      cmocka_unit_test(a_large_block_is_kept_and_reused),
      cmocka_unit_test(a_charge_is_counted_once),
      cmocka_unit_test(a_large_aligned_block_is_kept_and_reused),
      cmocka_unit_test(kept_blocks_stay_within_the_budget),
      cmocka_unit_test(freed_heap_pages_go_back_near_a_full_budget),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
