/* memory.c - the allocator wrappers behind the memory budget (memory.h). Counters are C11
 * atomics, fed by per-thread deltas (share_count): workers and the loops allocate at once. The
 * guard is thread-local. */
#define _GNU_SOURCE
#include "memory.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <uv.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **out, size_t align, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
void *__wrap_aligned_alloc(size_t align, size_t n);
int __wrap_posix_memalign(void **out, size_t align, size_t n);
char *__wrap_strdup(const char *s);

#define MIB ((uint64_t)1 << 20)

static uint64_t budget = UINT64_MAX;
static _Atomic uint64_t in_use;
static _Atomic uint64_t peak;
static _Thread_local bool guarded;
static _Thread_local bool refused;

/* What a block costs: its usable bytes and the allocator's header word (glibc's chunk size),
 * so thousands of small blocks (a request's JSON tree) count what they really hold. */
static uint64_t usable_cost(size_t usable) {
  return usable + sizeof(size_t);
}

static uint64_t block_bytes(void *p) {
  return usable_cost(malloc_usable_size(p));
}

/* Each thread counts into a delta of its own and adds it to the shared counter once it reaches
 * COUNT_BATCH either way: every small block counted straight into one atomic made the event
 * loops' threads fight over its cache line (two loops lowering small graphs spent more CPU per
 * request than one). So the shared count is off by less than COUNT_BATCH per thread, next to a
 * budget of at least 64 MiB; a block of COUNT_BATCH or more is counted at once. */
#define COUNT_BATCH ((int64_t)64 << 10)
static _Thread_local int64_t unshared;

/* Raises the peak to now if it is higher. */
static void note_peak(uint64_t now) {
  uint64_t old = atomic_load_explicit(&peak, memory_order_relaxed);
  while (now > old && !atomic_compare_exchange_weak_explicit(&peak, &old, now, memory_order_relaxed,
                                                             memory_order_relaxed)) {
  }
}

/* ---- freed heap pages go back before they sit beside a full budget -------------------------
 * glibc keeps the pages of freed heap blocks resident until malloc_trim, and a block freed in
 * the middle of the heap (a refused request's JSON tree, a frame body carved from a free
 * chunk) is not given back by free. The budget counts what is in use, so those pages stood
 * beside it: at --max-memory 64M, three 16 MiB requests on two workers peaked at 82 MiB
 * resident in about one run in 25 under load, with 62 MiB counted and 17 MiB of the heap free
 * but resident. So the bytes freed since the heap was last trimmed are summed, an upper bound
 * of what is resident and not counted (blocks given back to the system, and bytes counted ahead
 * that no block took, are in it too, which only trims sooner); when they and the bytes in use would
 * pass the budget by TRIM_SLACK, the worker whose allocation got there trims the heap first (one at
 * a time; the others go on). Near a full budget a trim is at most once per TRIM_SLACK freed, and
 * never otherwise. */
#define TRIM_SLACK ((uint64_t)8 << 20)
static _Atomic uint64_t freed_untrimmed;
static atomic_flag trimming = ATOMIC_FLAG_INIT;

void vld_mem_trim(void) {
  /* zeroed first: what is freed while the heap is walked is counted for the next trim */
  atomic_store_explicit(&freed_untrimmed, 0, memory_order_relaxed);
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

/* The bytes in use just rose to now (the peak too, if higher): on a worker (under the guard),
 * trims the heap if now and the freed bytes not yet trimmed pass the budget by more than
 * TRIM_SLACK. Never on an event loop: a trim walks the heap (10-13 ms for a 64 MiB heap of
 * small blocks, half of them freed), and a loop admits frames under the server lock; the
 * worker that reads the frame trims instead, as its request's first blocks are counted. */
static void note_growth(uint64_t now) {
  note_peak(now);
  if (!guarded) {
    return; /* an event loop: the shared count is not even read */
  }
  uint64_t resident = now + atomic_load_explicit(&freed_untrimmed, memory_order_relaxed);
  if (resident <= budget || resident - budget <= TRIM_SLACK ||
      atomic_flag_test_and_set_explicit(&trimming, memory_order_acquire)) {
    return;
  }
  vld_mem_trim();
  atomic_flag_clear_explicit(&trimming, memory_order_release);
}

static void share_count(void) {
  int64_t d = unshared;
  unshared = 0;
  if (d > 0) {
    note_growth(atomic_fetch_add_explicit(&in_use, (uint64_t)d, memory_order_relaxed) +
                (uint64_t)d);
  } else if (d < 0) {
    /* Saturates at 0: a block some library allocated behind our back may be freed through us. */
    uint64_t n = (uint64_t)-d;
    atomic_fetch_add_explicit(&freed_untrimmed, n, memory_order_relaxed);
    uint64_t old = atomic_load_explicit(&in_use, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&in_use, &old, old > n ? old - n : 0,
                                                  memory_order_relaxed, memory_order_relaxed)) {
    }
  }
}

/* ---- checked and counted in one step ---------------------------------------------------------
 * A large allocation that must fit the budget (a worker's, under the guard; a frame body the
 * loop admits) is counted before it is made, by one compare-and-swap that adds its bytes only
 * if they fit: checked first and counted after, two loops admitted a 12 MiB frame each on the
 * same free bytes, and a worker's copy raced a loop's frame (the counted peak read 38.2 MB at
 * --max-memory 32M). The bytes so counted ahead are this thread's prepaid; the next block it
 * counts in takes them as its own (count_in), and settle() gives back what no block took (an
 * allocation that failed, or one served from the loop's cache, which is counted already). */
static _Thread_local uint64_t prepaid;

static bool charge(uint64_t n) {
  uint64_t now = atomic_load_explicit(&in_use, memory_order_relaxed);
  do {
    if (now > budget || n > budget - now) {
      return false;
    }
  } while (!atomic_compare_exchange_weak_explicit(&in_use, &now, now + n, memory_order_relaxed,
                                                  memory_order_relaxed));
  prepaid += n;
  note_growth(now + n);
  return true;
}

static void settle(void) {
  if (prepaid > 0) {
    unshared -= (int64_t)prepaid;
    prepaid = 0;
    share_count();
  }
}

static void count_in(void *p) {
  if (p == NULL) {
    return;
  }
  uint64_t b = block_bytes(p), paid = prepaid < b ? prepaid : b;
  prepaid -= paid;
  unshared += (int64_t)(b - paid);
  if (unshared >= COUNT_BATCH || b >= (uint64_t)COUNT_BATCH) { /* a large block at once */
    share_count();
  }
}

/* Counts out a block of u usable bytes (malloc_usable_size, known to the caller). */
static void count_out_usable(size_t u) {
  unshared -= (int64_t)usable_cost(u);
  if (unshared <= -COUNT_BATCH) {
    share_count();
  }
}

static void count_out(void *p) {
  if (p != NULL) {
    count_out_usable(malloc_usable_size(p));
  }
}

/* ---- the large blocks kept for reuse --------------------------------------------------------
 * A block of KEEP_MIN or more is a fresh map of its own (vld_mem_init), so each 64 MiB blob
 * round trip took two such maps (the frame body, the output tensor) and faulted in and zeroed
 * 128 MiB: a third of the daemon's time went to the kernel's page clearing, and on a 2-core VM
 * a round trip took 28 ms, or up to 240 ms when its pages came fresh from the host. The last
 * KEEP_SLOTS large blocks freed are therefore kept mapped, up to keep_cap() bytes in all (a
 * quarter of the budget, at most KEEP_MAX), and a request for n bytes takes the smallest kept
 * block of n to n + n/4 usable bytes. Kept bytes are not in use (vld_mem_in_use leaves them
 * out) but are resident, beside the heap's freed pages that are not trimmed yet. So a block is
 * kept only while in use and kept bytes stay within half the budget, and what the heap holds
 * from the system (heap_held) too; and an allocation (admit) and vld_mem_fits first give them
 * all back when in use, kept and the new bytes would pass half the budget. Peak resident memory
 * under the budget tests (it_budget.c) is as before: the kept blocks live only in the half of
 * the budget a load of large requests leaves unused. Any thread may keep or take, under one lock:
 * there are a few such blocks a request. Off under AddressSanitizer, as the small cache below. */
enum { KEEP_SLOTS = 4 };
#define KEEP_MIN ((size_t)4 << 20)
#define KEEP_MAX ((uint64_t)256 << 20)

static pthread_mutex_t keep_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  void *p;
  size_t usable;
} kept[KEEP_SLOTS]; /* oldest first */
static size_t kept_n;
static _Atomic uint64_t kept_bytes; /* their usable_cost in all, read without the lock */

/* Takes kept block i out of the slots (under keep_lock). */
static void *keep_remove(size_t i) {
  void *p = kept[i].p;
  atomic_fetch_sub_explicit(&kept_bytes, usable_cost(kept[i].usable), memory_order_relaxed);
  kept_n--;
  memmove(&kept[i], &kept[i + 1], (kept_n - i) * sizeof *kept);
  return p;
}

void vld_mem_release_kept(void) {
  void *out[KEEP_SLOTS];
  size_t n;
  pthread_mutex_lock(&keep_lock);
  for (n = 0; kept_n > 0; n++) {
    out[n] = keep_remove(0);
  }
  pthread_mutex_unlock(&keep_lock);
  for (size_t i = 0; i < n; i++) {
    __real_free(out[i]);
  }
}

static uint64_t keep_cap(void) {
  return budget / 4 < KEEP_MAX ? budget / 4 : KEEP_MAX;
}

/* Before n bytes more: the kept blocks go back when in use, kept and n would pass half the
 * budget. */
static void keep_make_room(uint64_t n) {
  uint64_t k = atomic_load_explicit(&kept_bytes, memory_order_relaxed);
  if (k == 0) {
    return;
  }
  uint64_t held = atomic_load_explicit(&in_use, memory_order_relaxed) + k;
  if (held > budget / 2 || n > budget / 2 - held) {
    vld_mem_release_kept();
  }
}

/* What the heap holds from the system, free parts included (they stay resident until trimmed),
 * and the maps of large blocks, kept ones included: more than is in use. */
static uint64_t heap_held(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
  struct mallinfo2 mi = mallinfo2();
  return (uint64_t)mi.arena + (uint64_t)mi.hblkhd;
#else
  return atomic_load_explicit(&in_use, memory_order_relaxed) +
         atomic_load_explicit(&kept_bytes, memory_order_relaxed);
#endif
}

/* A kept block of n to n + n/4 usable bytes (the smallest) starting at a multiple of align,
 * or NULL. */
static void *keep_take(size_t n, size_t align) {
  void *p = NULL;
  if (!VLD_MEM_CACHE_ON || n < KEEP_MIN ||
      atomic_load_explicit(&kept_bytes, memory_order_relaxed) == 0) {
    return NULL;
  }
  pthread_mutex_lock(&keep_lock);
  size_t best = kept_n;
  for (size_t i = 0; i < kept_n; i++) {
    size_t u = kept[i].usable;
    if (u >= n && u - n <= n / 4 && (uintptr_t)kept[i].p % align == 0 &&
        (best == kept_n || u < kept[best].usable)) {
      best = i;
    }
  }
  if (best < kept_n) {
    p = keep_remove(best);
  }
  pthread_mutex_unlock(&keep_lock);
  return p;
}

/* Keeps p (usable bytes u, already counted out), in place of the oldest kept blocks while the
 * slots or keep_cap() are full, if the budget allows; false when it is not kept. */
static bool keep_put(void *p, size_t u) {
  void *evicted[KEEP_SLOTS];
  size_t n_evicted = 0;
  bool put = false;
  uint64_t bytes = usable_cost(u);
  if (!VLD_MEM_CACHE_ON || u < KEEP_MIN || bytes > keep_cap()) {
    return false;
  }
  pthread_mutex_lock(&keep_lock);
  while (kept_n > 0 &&
         (kept_n == KEEP_SLOTS ||
          atomic_load_explicit(&kept_bytes, memory_order_relaxed) + bytes > keep_cap())) {
    evicted[n_evicted++] = keep_remove(0); /* the oldest makes way */
  }
  uint64_t k = atomic_load_explicit(&kept_bytes, memory_order_relaxed);
  if (atomic_load_explicit(&in_use, memory_order_relaxed) + k + bytes <= budget / 2 &&
      heap_held() <= budget / 2) {
    kept[kept_n].p = p;
    kept[kept_n++].usable = u;
    atomic_fetch_add_explicit(&kept_bytes, bytes, memory_order_relaxed);
    put = true;
  }
  pthread_mutex_unlock(&keep_lock);
  for (size_t i = 0; i < n_evicted; i++) {
    __real_free(evicted[i]);
  }
  return put;
}

/* May this thread take n more bytes? Outside a guard always (the loop's own small blocks).
 * Under it, a block of COUNT_BATCH or more is charged (counted ahead, in one step with the
 * check); a smaller one is checked alone, as its count may wait in this thread's batch anyway. */
static bool admit(size_t n) {
  keep_make_room(n);
  if (!guarded || (n >= (size_t)COUNT_BATCH
                       ? charge(n)
                       : atomic_load_explicit(&in_use, memory_order_relaxed) + n <= budget)) {
    return true;
  }
  refused = true;
  return false;
}

/* ---- the event loops' block cache -----------------------------------------------------------
 * Every thread allocates from one glibc arena (vld_mem_init), so two event loops lowering small
 * graphs (hundreds of small blocks a request) queued on its lock: a tenth of their time went to
 * waiting for it, and two loops answered no more than one. A loop's thread therefore keeps the
 * small blocks it frees, up to CACHE_DEPTH of each glibc size and CACHE_BYTES in all, and hands
 * them out again without the lock (calloc too, zeroed here, and realloc, for blocks that grow
 * through those sizes; calloc left to glibc kept 15% of the daemon's time on small lowerings in
 * the lock's wake-ups, and two loops answered 20k/s against 39k/s with it cached). They are
 * glibc's blocks all the while, counted as in use (they are: the daemon holds them), so
 * realloc, malloc_usable_size and a free by another thread need nothing special. Size classes
 * follow glibc's usable sizes (16 k + 8): class k holds blocks of at least 16 k + 8 usable
 * bytes, which is all a request of that much needs. Off under AddressSanitizer
 * (VLD_MEM_CACHE_ON, memory.h). */
enum { CACHE_CLASSES = 256, CACHE_DEPTH = 64, CACHE_BYTES = 512 << 10 };
enum { PREFILL_CLASSES = 32, PREFILL_DEPTH = 32 };
/* Past the 16-byte classes, four of powers of two, 8 to 64 KiB (the JSON reader's tapes, the
 * printed texts of a small lowering): with only small blocks cached, the two loops still met on
 * the heap's lock over these, one futex call per three small lowerings. A loop's request of
 * 4 KiB to 64 KiB is rounded up to its power of two, so that its block fits its class. */
enum { BIG_CLASSES = 4, BIG_MIN_LOG2 = 13, BIG_DEPTH = 4, BIG_BYTES = 512 << 10 };
enum { ALL_CLASSES = CACHE_CLASSES + BIG_CLASSES };
#define SMALL_MAX ((size_t)16 * (CACHE_CLASSES - 1) + 8)
#define BIG_MAX ((size_t)1 << (BIG_MIN_LOG2 + BIG_CLASSES - 1))

typedef struct cached_block {
  struct cached_block *next;
} cached_block;

static _Thread_local bool caching;
static _Thread_local cached_block *cache_head[ALL_CLASSES];
static _Thread_local uint8_t cache_len[ALL_CLASSES];
static _Thread_local size_t cache_bytes, cache_big_bytes;

/* The bytes every block of class k has. */
static size_t class_size(size_t k) {
  return k < CACHE_CLASSES ? 16 * k + 8 : (size_t)1 << (k - CACHE_CLASSES + BIG_MIN_LOG2);
}

/* The class whose blocks fit n bytes (the least k with class_size(k) >= n); ALL_CLASSES when
 * none does. */
static size_t class_for(size_t n) {
  if (n <= SMALL_MAX) {
    return n <= 24 ? 1 : (n - 8 + 15) / 16;
  }
  for (size_t k = CACHE_CLASSES; k < ALL_CLASSES; k++) {
    if (class_size(k) >= n) {
      return k;
    }
  }
  return ALL_CLASSES;
}

/* What to ask glibc for, for n bytes on a caching thread: n, or its big class's size. */
static size_t cache_request(size_t n) {
  size_t k = caching && n > SMALL_MAX ? class_for(n) : ALL_CLASSES;
  return k < ALL_CLASSES ? class_size(k) : n;
}

static void *cache_take(size_t n) {
  size_t k = class_for(n);
  if (!caching || k >= ALL_CLASSES || cache_head[k] == NULL) {
    return NULL;
  }
  cached_block *b = cache_head[k];
  cache_head[k] = b->next;
  cache_len[k]--;
  *(k < CACHE_CLASSES ? &cache_bytes : &cache_big_bytes) -= class_size(k);
  return b;
}

/* Keeps p (usable bytes u) for this thread; false when the cache is full for it. */
static bool cache_keep(void *p, size_t u) {
  size_t k = u >= 8 ? (u - 8) / 16 : 0; /* its blocks have at least 16 k + 8 bytes */
  if (u > SMALL_MAX) { /* the largest big class it fills, if it is less than twice that */
    k = 0;
    for (size_t j = CACHE_CLASSES; j < ALL_CLASSES && class_size(j) <= u; j++) {
      k = j;
    }
    if (k != 0 && u >= 2 * class_size(k)) {
      k = 0;
    }
  }
  bool big = k >= CACHE_CLASSES;
  size_t *bytes = big ? &cache_big_bytes : &cache_bytes;
  if (!caching || k == 0 || cache_len[k] >= (big ? BIG_DEPTH : CACHE_DEPTH) ||
      *bytes + class_size(k) > (big ? BIG_BYTES : CACHE_BYTES)) {
    return false;
  }
  cached_block *b = p;
  b->next = cache_head[k];
  cache_head[k] = b;
  cache_len[k]++;
  *bytes += class_size(k);
  return true;
}

void vld_mem_cache_begin(void) {
  caching = VLD_MEM_CACHE_ON;
  /* straight from glibc, one after another: __wrap_malloc would hand back the block just kept */
  for (size_t k = 1; caching && k <= PREFILL_CLASSES; k++) {
    for (size_t i = 0; i < PREFILL_DEPTH; i++) {
      void *p = __real_malloc(16 * k + 8);
      if (p == NULL) {
        break;
      }
      count_in(p);
      if (!cache_keep(p, malloc_usable_size(p))) {
        count_out(p);
        __real_free(p);
        break;
      }
    }
  }
}

void vld_mem_cache_end(void) {
  caching = false;
  for (size_t k = 0; k < ALL_CLASSES; k++) {
    while (cache_head[k] != NULL) {
      cached_block *b = cache_head[k];
      cache_head[k] = b->next;
      __wrap_free(b);
    }
    cache_len[k] = 0;
  }
  cache_bytes = 0;
  cache_big_bytes = 0;
}

/* Large blocks (frame bodies, tensors, response payloads: each a fresh map, see vld_mem_init)
 * are asked to be backed by transparent huge pages where the system offers them on request:
 * their first touch then takes one fault per 2 MiB instead of one per 4 KiB page, which was
 * most of a 64 MiB blob round trip. Only the 2 MiB-aligned interior can be huge. */
#define HUGE_HINT_MIN ((size_t)4 << 20)
static void hint_huge(void *p, size_t n) {
#ifdef MADV_HUGEPAGE
  const uintptr_t huge = (uintptr_t)2 << 20;
  if (p == NULL || n < HUGE_HINT_MIN) {
    return;
  }
  uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1), hi = ((uintptr_t)p + n) & ~(huge - 1);
  if (hi > lo) {
    (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
  }
#else
  (void)p;
  (void)n;
#endif
}

static void *counted_malloc(size_t n) {
  void *p = cache_take(n);
  if (p != NULL) {
    return p;
  }
  if (!admit(n)) {
    return NULL;
  }
  p = keep_take(n, 1);
  if (p == NULL) {
    p = __real_malloc(cache_request(n));
    hint_huge(p, n);
  }
  count_in(p);
  return p;
}

void *__wrap_malloc(size_t n) {
  void *r = counted_malloc(n);
  settle();
  return r;
}

static void *counted_calloc(size_t k, size_t n) {
  size_t total;
  if (__builtin_mul_overflow(k, n, &total)) {
    return NULL;
  }
  void *p = cache_take(total);
  if (p != NULL) {
    return memset(p, 0, total);
  }
  if (!admit(total)) {
    return NULL;
  }
  p = keep_take(total, 1);
  if (p != NULL) {
    memset(p, 0, total);
  } else {
    size_t ask = cache_request(total);
    p = ask == total ? __real_calloc(k, n) : __real_calloc(1, ask);
    hint_huge(p, total);
  }
  count_in(p);
  return p;
}

void *__wrap_calloc(size_t k, size_t n) {
  void *r = counted_calloc(k, n);
  settle();
  return r;
}

/* realloc on a loop's thread, from its cache: a block that grows (a text being written) takes
 * a cached one, or past the small classes a new one of its big class, and leaves the old one to
 * the cache; one that shrinks stays as it is. NULL when glibc is to do it: past the big
 * classes, or for a small size the cache has no block of. */
static void *cache_realloc(void *p, size_t n) {
  size_t u = malloc_usable_size(p);
  if (n > BIG_MAX || u > 2 * BIG_MAX) {
    return NULL;
  }
  if (n <= u) {
    return p;
  }
  void *q = cache_take(n);
  if (q == NULL && n > SMALL_MAX) {
    q = __wrap_malloc(n); /* of its class's size (cache_request) */
  }
  if (q != NULL) {
    memcpy(q, p, u);
    __wrap_free(p);
  }
  return q;
}

static void *counted_realloc(void *p, size_t n) {
  if (p == NULL) {
    /* realloc(NULL, n) is malloc(n), and is served like it: from the loop's cache. Passed to
     * glibc, the first block of every growing buffer (the JSON reader's tape and text arena,
     * the graph's node array) took the heap's lock: with two loops on 16 clients' small
     * lowerings, 0.13 futex calls per request, each a wake-up of the other loop. */
    return __wrap_malloc(n);
  }
  void *c = n > 0 && caching ? cache_realloc(p, n) : NULL;
  if (c != NULL) {
    return c;
  }
  size_t old = p != NULL ? malloc_usable_size(p) : 0;
  if (n > old && !admit(n - old)) {
    return NULL;
  }
  count_out(p);
  void *q = __real_realloc(p, n);
  if (q == NULL && n > 0) {
    count_in(p); /* p is still there */
    return NULL;
  }
  count_in(q);
  return q;
}

void *__wrap_realloc(void *p, size_t n) {
  void *r = counted_realloc(p, n);
  settle();
  return r;
}

void __wrap_free(void *p) {
  if (p == NULL) {
    return;
  }
  size_t u = malloc_usable_size(p);
  if (caching && cache_keep(p, u)) {
    return;
  }
  count_out_usable(u);
  if (!keep_put(p, u)) {
    __real_free(p);
  }
}

/* Large aligned blocks are kept and taken like the others (a kept block serves when it starts
 * on the alignment asked): the core's tensors come from aligned_alloc (64-byte lines), and
 * without this every tensor of 4 MiB or more was a fresh map, faulted in and cleared by the
 * kernel on each request (the 64 MiB transposing view_copy: 16,384 page faults a round trip).
 * NULL when none is kept; an alignment that is not a power of two is left to glibc. */
static void *keep_take_aligned(size_t align, size_t n) {
  return align != 0 && (align & (align - 1)) == 0 ? keep_take(n, align) : NULL;
}

static void *counted_aligned_alloc(size_t align, size_t n) {
  if (!admit(n)) {
    return NULL;
  }
  void *p = keep_take_aligned(align, n);
  if (p == NULL) {
    p = __real_aligned_alloc(align, n);
    hint_huge(p, n);
  }
  count_in(p);
  return p;
}

void *__wrap_aligned_alloc(size_t align, size_t n) {
  void *r = counted_aligned_alloc(align, n);
  settle();
  return r;
}

static int counted_posix_memalign(void **out, size_t align, size_t n) {
  if (!admit(n)) {
    return ENOMEM;
  }
  void *p = keep_take_aligned(align, n);
  if (p == NULL) {
    int rc = __real_posix_memalign(&p, align, n);
    if (rc != 0) {
      return rc;
    }
    hint_huge(p, n);
  }
  count_in(p);
  *out = p;
  return 0;
}

int __wrap_posix_memalign(void **out, size_t align, size_t n) {
  int r = counted_posix_memalign(out, align, n);
  settle();
  return r;
}

char *__wrap_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = __wrap_malloc(n);
  if (p != NULL) {
    memcpy(p, s, n);
  }
  return p;
}

/* A number from a one-line file ("max" or unreadable: 0). */
static uint64_t read_number_file(const char *path) {
  FILE *f = fopen(path, "r");
  unsigned long long v = 0;
  if (f != NULL) {
    if (fscanf(f, "%llu", &v) != 1) {
      v = 0;
    }
    fclose(f);
  }
  return v;
}

/* memory.max of our own cgroup (v2), 0 when unlimited or unknown. */
static uint64_t cgroup_limit(void) {
  FILE *f = fopen("/proc/self/cgroup", "r");
  char line[512], path[640];
  uint64_t v = 0;
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "0::", 3) == 0) {
      line[strcspn(line, "\n")] = '\0';
      snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", line + 3);
      v = read_number_file(path);
    }
  }
  if (f != NULL) {
    fclose(f);
  }
  return v;
}

uint64_t vld_mem_default(void) {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  uint64_t ram = pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 4096 * MIB;
  uint64_t v = ram / 2, cg = cgroup_limit();
  if (cg > 0 && cg / 4 * 3 < v) {
    v = cg / 4 * 3;
  }
  return v < 64 * MIB ? 64 * MIB : v;
}

void vld_mem_init(uint64_t bytes) {
  budget = bytes > 0 ? bytes : vld_mem_default();
  cJSON_Hooks hooks = {.malloc_fn = __wrap_malloc, .free_fn = __wrap_free};
  cJSON_InitHooks(&hooks);
  uv_replace_allocator(__wrap_malloc, __wrap_realloc, __wrap_calloc, __wrap_free);
#ifdef M_MMAP_THRESHOLD
  /* Blocks of 1 MiB and more (tensors, frames, response texts) come from mmap and go back to
   * the system when freed, so resident memory follows the counted bytes instead of keeping the
   * heap's high-water mark (glibc would raise the threshold to 32 MiB as such blocks are freed). */
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
#ifdef M_ARENA_MAX
  /* One heap for every thread: the small blocks a worker frees (a request's JSON tree, which
   * glibc keeps in its fast bins) are reused by the next worker rather than held resident in
   * that worker's own arena while another arena grows; resident memory then follows the
   * counted bytes (one 16 MiB request of "0,0,..." after another on two workers peaked at
   * 82 MiB with an arena each at --max-memory 64M; with an arena per event loop, shared by the
   * workers, 84 MiB). Each thread's cache of small blocks, and the event loops' own (above),
   * keep the lock off the hot path. */
  mallopt(M_ARENA_MAX, 1);
#endif
}

uint64_t vld_mem_budget(void) {
  return budget;
}

uint64_t vld_mem_in_use(void) {
  return atomic_load_explicit(&in_use, memory_order_relaxed);
}

uint64_t vld_mem_peak(void) {
  return atomic_load_explicit(&peak, memory_order_relaxed);
}

uint64_t vld_mem_kept(void) {
  return atomic_load_explicit(&kept_bytes, memory_order_relaxed);
}

bool vld_mem_fits(uint64_t bytes) {
  keep_make_room(bytes);
  uint64_t now = vld_mem_in_use();
  return now <= budget && bytes <= budget - now;
}

bool vld_mem_charge(uint64_t bytes) {
  keep_make_room(bytes);
  return charge(bytes);
}

void vld_mem_guard_begin(void) {
  guarded = true;
  refused = false;
}

bool vld_mem_guard_end(void) {
  guarded = false;
  return refused;
}
