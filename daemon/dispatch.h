/* dispatch.h - the life of one request: frame -> JSON-RPC envelope -> method -> response ->
 * statistics -> the connection's write queue. The methods are the core's table
 * (viewlower/service.h: name, weight) plus the daemon's own "stats". A dispatcher knows the
 * connections it answers (conn.h) and nothing of the server: what it needs from its owner
 * comes through the two callbacks below. A dispatcher serves one event loop and is used on its
 * thread only, but for the work itself; what all loops share (statistics, users' shares, the
 * count of queued work) it touches under the shared lock. */
#ifndef VIEWLOWERD_DISPATCH_H
#define VIEWLOWERD_DISPATCH_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "conn.h"
#include "shares.h"
#include "stats.h"

typedef struct vld_dispatcher {
  uv_loop_t *loop;
  const vld_config *cfg;
  /* Shared with the other loops' dispatchers, under *mu: */
  uv_mutex_t *mu;
  vld_stats *stats;
  vld_shares *shares;
  uint32_t *pool_queued; /* requests on the thread pool, all loops (--max-queued) */
  /* This loop's: */
  uint32_t inflight;       /* its requests on the thread pool (handed to it, or waiting) */
  uint32_t submitted;      /* ... of which handed to libuv's pool, queued there or running */
  struct vld_lane *lanes;  /* ... the others, waiting in one lane per user (dispatch.c) */
  uint64_t loop_window_ns; /* the current window of the loop's time for small heavy requests */
  uint64_t loop_spent_ns;  /* ... and what they took of it */
  void *owner;
  /* Work went to the pool, or a lent view_copy was answered on the loop (large blocks were
   * freed): the owner watches for hang-ups and for the pool's idle second (server.c). */
  void (*on_queued)(void *owner);
  /* The result of the daemon's own "stats" method (NULL on out-of-memory). */
  cJSON *(*stats_result)(void *owner);
} vld_dispatcher;

/* Takes frame (a complete request of c) and answers it exactly once: on the loop when it is
 * small and light (or invalid, or "stats"), else on the thread pool; past --max-queued (or the
 * user's share) a heavy one gets -32005 at once. */
void vld_dispatch_frame(vld_dispatcher *d, vld_conn *c, vl_frame *frame);
/* Cancels c's requests that wait for a worker (c is closing): those in the lanes are dropped
 * at once, those queued on libuv's pool are freed unanswered by their after_work. */
void vld_dispatch_cancel(vld_conn *c);
/* The drain timed out: c's requests still queued on the pool are answered -32007 (shutting
 * down) instead of run; those already running finish and are answered. */
void vld_dispatch_expire(vld_conn *c);

/* The methods counted by stats: the core's, then "stats". */
size_t vld_dispatch_method_count(void);
const char *vld_dispatch_method_name(size_t i);

#endif
