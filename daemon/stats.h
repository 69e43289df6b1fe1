/* stats.h - the daemon's counters for the "stats" method: connections, requests and errors
 * per method, views replaced, bytes saved, and request latency percentiles over a window of
 * the most recent requests. Touched only on the event loop thread. */
#ifndef VIEWLOWERD_STATS_H
#define VIEWLOWERD_STATS_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#define VLD_STATS_MAX_METHODS 16
#define VLD_STATS_WINDOW 4096 /* latency samples kept */

typedef struct vld_method_counts {
  uint64_t requests;
  uint64_t errors;
} vld_method_counts;

/* Why a connection was refused or dropped; each has a counter and a rate-limited warning. */
typedef enum {
  VLD_REFUSE_NOT_PERMITTED, /* -32006: the peer's uid and gid are not let in */
  VLD_REFUSE_CONNECTIONS,   /* -32005: --max-connections */
  VLD_REFUSE_UID,           /* -32005: --max-connections-per-uid */
  VLD_REFUSE_FD_LIMIT,      /* dropped unanswered: no file descriptor left to answer with */
  VLD_REFUSE_NOMEM,         /* dropped unanswered: no memory for the connection */
  VLD_REFUSE_ACCEPT_ERROR,  /* accept failed (EMFILE, ENFILE, ENOMEM...) */
  VLD_REFUSE_COUNT
} vld_refusal;

/* Why a request was answered -32005 without running. */
typedef enum {
  VLD_SHED_QUEUE,      /* --max-queued */
  VLD_SHED_UID,        /* --max-queued-per-uid */
  VLD_SHED_MEMORY,     /* --max-memory */
  VLD_SHED_UID_MEMORY, /* --max-memory-per-uid: its user's unread responses hold its share */
  VLD_SHED_COUNT
} vld_shed;

extern const char *const vld_refusal_names[VLD_REFUSE_COUNT];
extern const char *const vld_shed_names[VLD_SHED_COUNT];

typedef struct vld_stats {
  uint64_t start_ns;
  uint64_t conns_total;    /* accepted and let in */
  uint64_t conns_rejected; /* refused or dropped, any reason */
  uint64_t refused[VLD_REFUSE_COUNT];
  uint64_t shed[VLD_SHED_COUNT];
  vld_method_counts by_method[VLD_STATS_MAX_METHODS];
  vld_method_counts invalid; /* requests that named no known method, or none at all */
  uint64_t cancelled;       /* dropped unstarted and unanswered: their connection closed */
  uint64_t memory_waits_admitted; /* frames admitted after waiting for memory */
  uint64_t share_pauses; /* a connection stopped being read: its user at its memory share */
  uint64_t yields; /* a connection's buffered frames left for its loop's next pass (vld_turn) */
  uint64_t served_on_loop; /* small graph-bound requests (lower, validate) and lent view_copies
                            run on the loop */
  uint64_t views_replaced;
  int64_t bytes_saved;
  uint32_t latency_us[VLD_STATS_WINDOW]; /* ring of the latest samples */
  size_t latency_count;                 /* samples ever taken */
  uint32_t latency_max_us;
} vld_stats;

void vld_stats_init(vld_stats *s, uint64_t now_ns);
/* Counts one answered request; method < 0 for an invalid one. */
void vld_stats_record(vld_stats *s, int method, int is_error, uint64_t latency_ns);

/* What the stats method reports besides the counters. */
typedef struct vld_stats_view {
  const char *const *method_names; /* one per by_method slot */
  size_t n_methods;
  uint32_t conns_current;
  uint32_t conns_waiting_for_memory; /* their next frame waits, unread, for memory */
  uint32_t requests_in_flight;
  uint64_t now_ns;
  uint64_t memory_budget;
  uint64_t memory_in_use;
  uint64_t memory_peak;
  uint64_t memory_kept;      /* large freed blocks kept mapped for the next large request */
  uint64_t memory_unsent;    /* held by responses not yet written, all users (shares.c) */
  uint64_t memory_share_per_uid; /* --max-memory-per-uid, resolved */
  uint64_t open_files_limit; /* the soft RLIMIT_NOFILE the daemon runs with */
} vld_stats_view;

/* The stats result object; NULL on out-of-memory. */
cJSON *vld_stats_to_json(const vld_stats *s, const vld_stats_view *v);

#endif
