/* server.h - the daemon's server: listening, accepting, access control, per-user shares,
 * signals, the memory wait and the shutdown, over one or more event loops (--loops). It owns the
 * connections (conn.h, whose callbacks it sets) and a dispatcher per loop (dispatch.h) and is
 * the only module that knows both.
 *
 * A closed connection stops counting against --max-connections as soon as its handles are
 * closed, even while running work still holds a reference: that work will not be answered,
 * so it must not lock new clients out. Work still queued when a connection closes is
 * cancelled (uv_cancel) rather than run for nobody. */
#ifndef VIEWLOWERD_SERVER_H
#define VIEWLOWERD_SERVER_H

#include <stdatomic.h>
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
#define VLD_MAX_LOOPS 64

typedef struct vld_server vld_server;

/* An accepted socket and its peer's credentials. */
typedef struct vld_peer {
  int fd;
  pid_t pid;
  uid_t uid;
  gid_t gid;
} vld_peer;

/* One event loop and the connections it serves. The first runs on the main thread; the others
 * each on a thread of their own. Another loop's thread never touches a loop's handles: it posts
 * a command (the fields under the server's lock) and wakes the loop. */
typedef struct vld_shard {
  vld_server *srv;
  unsigned index;
  uv_loop_t *loop;
  uv_loop_t own_loop; /* the loop of a shard past the first */
  uv_thread_t thread;
  bool thread_started;
  uv_async_t wake;        /* commands and accepted sockets from the first loop */
  uv_pipe_t first_stream; /* closed at once (init_shard) */
  uv_timer_t hup_probe;   /* looks for peers gone while their connection is not being read */
  unsigned idle_probes;   /* probes in a row that found the pool idle (server.c) */
  uv_prepare_t kept_watch; /* each loop turn: kept large blocks get their idle second */
  uv_timer_t mem_wait;    /* resumes connections paused for memory */
  vld_turn turn;          /* the loop's passes over its connections' buffered frames */
  vld_dispatcher dispatch;
  vld_conn *conns; /* this loop's connection objects */
  bool finished;
  /* Under srv->mu: */
  uint32_t n_conns;       /* its counted connections, with those handed to it not yet taken */
  struct vld_peer *adopt; /* admitted peers to take */
  size_t n_adopt, cap_adopt;
  bool cmd_drain, cmd_close_all, cmd_expire, cmd_finish;
} vld_shard;

struct vld_server {
  uv_loop_t *loop; /* the first shard's: signals, accepting, the drain timer, the watchdog */
  const vld_config *cfg;
  uv_poll_t listener; /* readable: connections to accept */
  int listen_fd;
  uv_signal_t sigterm;
  uv_signal_t sigint;
  uv_signal_t ignored[VLD_N_IGNORED_SIGNALS]; /* SIGHUP, SIGUSR1, SIGUSR2: logged, ignored */
  uv_timer_t drain;
  uv_timer_t watchdog;
  uv_timer_t accept_retry; /* accept failed (EMFILE, ENOMEM...): listen again a little later */
  bool listening;
  char socket_path[108]; /* the socket file we bound, removed at shutdown ("" if none) */
  dev_t socket_dev;      /* ... if it is still that file */
  ino_t socket_ino;
  struct timespec socket_ctime; /* after the chmod */
  int lock_fd;           /* flock on <socket>.lock while starting to listen; else -1 */
  uint64_t nofile;       /* the soft RLIMIT_NOFILE we run with */
  uint32_t fd_cap;       /* open connection objects allowed (below nofile) */
  uid_t self_uid;
  vld_conn_limits conn_limits;
  vld_shard shards[VLD_MAX_LOOPS];
  unsigned n_shards;
  uv_sem_t shard_started; /* a new loop's thread is running (start_shards) */
  /* Shared by the loops, under mu (recursive: a callback under it may close a connection, whose
   * callbacks take it again). Never held across reading, dispatching or work. */
  uv_mutex_t mu;
  bool mu_ready;
  bool shutting_down;
  bool finish_posted;
  uint32_t n_open;      /* connection objects whose socket is open, refused ones included */
  uint32_t n_conns;     /* counted connections */
  uint32_t n_objects;   /* connection objects alive, all loops */
  uint32_t pool_queued; /* requests on the thread pool, all loops (--max-queued) */
  /* when work was last queued on any loop (uv_hrtime); atomic, outside mu: a request takes
   * the lock once, to be counted */
  _Atomic uint64_t last_work_ns;
  /* The heap trim a loop asks for when its pool goes idle, run on a worker; at most one queued
   * or running for the whole daemon. The request is used by whichever loop queued it, and
   * idle_trim_state (atomic, outside mu) says whether it is out and whether it was asked for
   * again while it ran (server.c, "the idle trim"). */
  uv_work_t idle_trim;
  _Atomic unsigned idle_trim_state;
  uint64_t next_serial;
  vld_log_limit refusal_log[VLD_REFUSE_COUNT];
  vld_shares shares;  /* what each user holds */
  vld_conn *mem_head; /* connections (of any loop) whose next frame waits for memory, by ticket */
  uint32_t n_mem_waiting;
  uint64_t mem_vtime;  /* the ticket of the last frame admitted from the queue */
  unsigned next_shard; /* where a tie of the fewest connections goes next */
  vld_stats stats;
};

/* Sets up listening (socket activation or our own socket file), signals and the watchdog.
 * On failure everything initialized is closed again; run the loop to finish the closes. */
int vld_server_start(vld_server *srv, uv_loop_t *loop, const vld_config *cfg);
/* Begins the graceful shutdown (also what SIGTERM/SIGINT do). */
void vld_server_shutdown(vld_server *srv);
/* After the first loop ended: waits for the other loops' threads and closes their loops. */
void vld_server_join(vld_server *srv);
#endif
