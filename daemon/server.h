/* server.h - the daemon's server: listening, accepting, access control, per-user shares,
 * signals, the memory wait and the shutdown. It owns the connections (conn.h, whose callbacks
 * it sets) and the dispatcher (dispatch.h) and is the only module that knows both.
 *
 * A closed connection stops counting against --max-connections as soon as its handles are
 * closed, even while running work still holds a reference: that work will not be answered,
 * so it must not lock new clients out. Work still queued when a connection closes is
 * cancelled (uv_cancel) rather than run for nobody. */
#ifndef VIEWLOWERD_SERVER_H
#define VIEWLOWERD_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "config.h"
#include "conn.h"
#include "dispatch.h"
#include "log.h"
#include "shares.h"
#include "stats.h"

#define VLD_N_IGNORED_SIGNALS 3

typedef struct vld_server vld_server;

struct vld_server {
  uv_loop_t *loop;
  const vld_config *cfg;
  uv_pipe_t listener;
  uv_pipe_t spare; /* accepts and drops a connection when no memory is left for it */
  uv_signal_t sigterm;
  uv_signal_t sigint;
  uv_signal_t ignored[VLD_N_IGNORED_SIGNALS]; /* SIGHUP, SIGUSR1, SIGUSR2: logged, ignored */
  uv_timer_t drain;
  uv_timer_t watchdog;
  bool listening;
  bool spare_busy;
  bool accept_pending; /* a connection waits to be dropped once the spare is free */
  bool shutting_down;
  bool finished;
  char socket_path[108]; /* the socket file we bound, removed at shutdown ("" if none) */
  dev_t socket_dev;      /* ... if it is still that file */
  ino_t socket_ino;
  struct timespec socket_ctime; /* after the chmod */
  int lock_fd;           /* flock on <socket>.lock while starting to listen; else -1 */
  uint64_t nofile;       /* the soft RLIMIT_NOFILE we run with */
  uint32_t fd_cap;       /* open connection objects allowed (below nofile) */
  uint32_t n_open;       /* connection objects whose socket is open, refused ones included */
  vld_log_limit refusal_log[VLD_REFUSE_COUNT];
  vld_shares shares; /* what each user holds */
  vld_conn_limits conn_limits;
  vld_dispatcher dispatch;
  vld_conn *conns;
  uint32_t n_conns; /* counted connections */
  uint64_t next_serial;
  uv_timer_t hup_probe; /* looks for peers gone while their connection is not being read */
  uv_timer_t mem_wait;  /* resumes connections paused for memory */
  vld_conn *mem_head;   /* connections whose next frame waits for memory, by ticket */
  uint32_t n_mem_waiting;
  uint64_t mem_vtime;   /* the ticket of the last frame admitted from the queue */
  uid_t self_uid;
  vld_stats stats;
};

/* Sets up listening (socket activation or our own socket file), signals and the watchdog.
 * On failure everything initialized is closed again; run the loop to finish the closes. */
int vld_server_start(vld_server *srv, uv_loop_t *loop, const vld_config *cfg);
/* Begins the graceful shutdown (also what SIGTERM/SIGINT do). */
void vld_server_shutdown(vld_server *srv);
#endif
