/* config.h - viewlowerd's settings: one declarative table of flags (name, bounds, default,
 * field), parsed from argv; every limit has a default and a flag (docs/daemon.md,
 * "Flags"). */
#ifndef VIEWLOWERD_CONFIG_H
#define VIEWLOWERD_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "log.h"
#include "viewlower/tensor.h"

#define VLD_CONFIG_MAX_IDS 64

typedef struct vld_config {
  const char *socket;       /* --socket; NULL: resolved as docs/daemon.md, "Running", lists */
  uint32_t socket_mode;     /* permission bits given to a socket file we create */
  uint32_t workers;         /* UV_THREADPOOL_SIZE */
  uint64_t max_frame_bytes; /* JSON + payload of one frame, both ways */
  uint32_t max_connections; /* open client connections */
  uint64_t idle_timeout_ms; /* no bytes and nothing in flight for this long: close; 0 never */
  uint32_t allow_uid[VLD_CONFIG_MAX_IDS];
  size_t n_allow_uid;
  uint32_t allow_gid[VLD_CONFIG_MAX_IDS];
  size_t n_allow_gid;
  uint32_t log_level;        /* a vld_log_level */
  uint32_t max_inflight;     /* requests in flight per connection before reading stops */
  uint32_t max_queued;       /* requests on the workers, all connections, before -32005 */
  uint64_t max_write_queue;  /* response bytes queued per connection before reading stops */
  uint64_t drain_timeout_ms; /* bound of the shutdown drain */
  uint64_t max_memory;       /* the memory budget in bytes; 0: derived from the machine */
  uint32_t max_conns_per_uid;  /* open connections of one uid */
  uint32_t max_queued_per_uid; /* requests of one uid queued or running on the workers */
  uint64_t max_memory_per_uid; /* memory of one uid's unread responses; 0: half the budget */
  uint32_t worker_nice;        /* the workers' nice above the loop's */
  uint32_t loops;              /* event loops serving connections; 0: one per online CPU */
  vl_limits limits;          /* core limits: nodes, tensor bytes, execution bytes */
} vld_config;

typedef enum { VLD_CONFIG_OK, VLD_CONFIG_HELP, VLD_CONFIG_VERSION, VLD_CONFIG_ERROR } vld_config_result;

/* Fills cfg with every default. */
void vld_config_init(vld_config *cfg);
/* Parses flags into cfg (initialized first). On VLD_CONFIG_ERROR, errbuf holds one line. */
vld_config_result vld_config_parse(vld_config *cfg, int argc, char **argv, char *errbuf, size_t n);
/* The event loops to run: --loops, or one per online CPU (at most VLD_DEFAULT_MAX_LOOPS). */
#define VLD_DEFAULT_MAX_LOOPS 8
unsigned vld_config_loops(const vld_config *cfg);
/* The --help text, with each flag's bounds and default. */
void vld_config_usage(FILE *out);

#endif
