/* memory.h - the daemon's one memory budget (--max-memory): every heap byte the process holds
 * through its own code, the core, cJSON and libuv is counted, and the work of a request may not
 * push the total past the budget.
 *
 * How: the daemon links with -Wl,--wrap for malloc, calloc, realloc, free, aligned_alloc,
 * posix_memalign and strdup (its own objects and the static core), and hands the same wrappers
 * to cJSON (cJSON_InitHooks) and libuv (uv_replace_allocator) before anything is allocated.
 * Each block counts malloc_usable_size bytes while it lives. On a thread inside
 * vld_mem_guard_begin/end (a worker running a request) an allocation that would pass the budget
 * fails instead (NULL: the core answers out-of-memory, which the daemon turns into -32005 with
 * the id); elsewhere (the event loop, whose allocations are small or checked first) allocations
 * always proceed. So the heap stays within the budget plus what the loop holds. */
#ifndef VIEWLOWERD_MEMORY_H
#define VIEWLOWERD_MEMORY_H

#include <stdbool.h>
#include <stdint.h>

/* Installs the hooks and sets the budget (0: derived from the machine, see vld_mem_default). */
void vld_mem_init(uint64_t budget);
/* Half the physical memory, or three quarters of the cgroup's memory.max when that is lower;
 * never under 64 MiB. */
uint64_t vld_mem_default(void);

uint64_t vld_mem_budget(void);
uint64_t vld_mem_in_use(void);
uint64_t vld_mem_peak(void);
/* Bytes of large blocks freed and kept mapped for the next large requests (memory.c): resident
 * but not in use, and given back before they would push resident memory past the budget. */
uint64_t vld_mem_kept(void);
/* Gives the kept blocks back to the system (an idle daemon). */
void vld_mem_release_kept(void);
/* Gives the heap's free pages back to the system (malloc_trim): after a large request, when
 * the pool goes idle, and on its own near a full budget (memory.c). Always on a worker: it walks
 * the heap, which would stall an event loop. */
void vld_mem_trim(void);
/* Would bytes more stay within the budget? */
bool vld_mem_fits(uint64_t bytes);
/* Counts bytes as in use, if they fit the budget, ahead of the allocation this thread makes
 * next (a frame body the loop admits), which then takes them as its own: checked and counted in
 * one step, so two threads never both take the same free bytes. false (nothing counted) when
 * they do not fit. What the next allocation does not take is given back when it returns. */
bool vld_mem_charge(uint64_t bytes);

/* An event loop's thread keeps the small blocks it frees for its next allocations, bounded
 * (memory.c), from vld_mem_cache_begin on; vld_mem_cache_end gives them back (before the
 * thread ends). Never on a worker: the guard below must see every allocation. */
void vld_mem_cache_begin(void);
/* 1 where that cache is on: not under AddressSanitizer, whose quarantine of freed blocks must
 * see every free. */
#if defined(__SANITIZE_ADDRESS__)
#define VLD_MEM_CACHE_ON 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VLD_MEM_CACHE_ON 0
#endif
#endif
#ifndef VLD_MEM_CACHE_ON
#define VLD_MEM_CACHE_ON 1
#endif
void vld_mem_cache_end(void);

/* Allocations of this thread beyond the budget fail from now on, until vld_mem_guard_end, which
 * returns whether one did fail meanwhile. */
void vld_mem_guard_begin(void);
bool vld_mem_guard_end(void);

#endif
