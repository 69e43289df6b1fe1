/* server.h - the daemon's server and connection objects, shared by server.c (listening,
 * accepting, access control, shutdown), conn.c (reading frames, writing responses,
 * back-pressure) and dispatch.c (requests on the thread pool).
 *
 * Lifetimes: a connection embeds its two handles (the pipe and the idle timer) and is
 * reference counted: one reference for the handles (dropped when both close callbacks ran),
 * one per request in flight on the thread pool, one per write not yet called back. It is freed
 * when the count reaches zero, so work finishing after the client left touches valid memory
 * and simply drops its response.
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
#include "log.h"
#include "stats.h"
#include "viewlower/buf.h"
#include "viewlower/frame.h"

#define VL_READ_BUF_SIZE 65536
#define VLD_N_IGNORED_SIGNALS 3
#define VLD_SMALL_FRAME 4096 /* JSON + payload bytes parsed on the loop, admitted at once */

typedef struct vl_server vl_server;

/* What one user holds: its open (counted) connections and its requests on the workers. */
typedef struct vld_uid_use {
  uid_t uid;
  uint32_t conns;
  uint32_t queued;
} vld_uid_use;
struct vl_work; /* a request on the thread pool (dispatch.c) */

typedef struct vl_conn {
  uv_pipe_t pipe;
  uv_timer_t idle;
  vl_server *srv;
  struct vl_conn *prev, *next; /* the server's list of open connections */
  uint64_t serial;             /* for logs */
  pid_t pid;
  uid_t uid;
  gid_t gid;
  vl_frame_decoder dec;
  uint8_t *rbuf;   /* VL_READ_BUF_SIZE bytes, read into only while nothing is left over */
  size_t rbuf_off; /* unconsumed bytes are rbuf[rbuf_off..rbuf_len) */
  size_t rbuf_len;
  unsigned refs;
  unsigned handles_open;
  struct vl_work *works; /* this connection's requests on the thread pool, to cancel on close */
  uint32_t inflight;     /* requests on the thread pool */
  uint32_t writes;       /* write requests not yet called back */
  uint64_t write_bytes;  /* their bytes */
  bool counted;          /* counts against --max-connections (not a refused peer) */
  bool reading;
  bool input_done; /* no more frames will be read: EOF, broken framing or refused peer */
  bool closing;
} vl_conn;

struct vl_server {
  uv_loop_t *loop;
  const vl_config *cfg;
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
  vld_uid_use *uids; /* users with a connection or a request, unordered */
  size_t n_uids, cap_uids;
  vl_conn *conns;
  uint32_t n_conns; /* counted connections */
  uint64_t next_serial;
  uint32_t inflight;    /* requests on the thread pool, all connections (--max-queued) */
  uv_timer_t hup_probe; /* looks for peers gone while their connection is not being read */
  uv_timer_t mem_wait;  /* resumes connections paused for memory */
  uid_t self_uid;
  vl_stats stats;
};

/* Sets up listening (socket activation or our own socket file), signals and the watchdog.
 * On failure everything initialized is closed again; run the loop to finish the closes. */
int vl_server_start(vl_server *srv, uv_loop_t *loop, const vl_config *cfg);
/* Begins the graceful shutdown (also what SIGTERM/SIGINT do). */
void vl_server_shutdown(vl_server *srv);
/* Called when a connection is freed: finishes a shutdown once no connection is left. */
void vl_server_conn_gone(vl_server *srv);
/* The use of uid, made (zeroed) when absent; NULL on out-of-memory. Entries holding nothing
 * are dropped by vld_uid_forget. */
vld_uid_use *vld_uid_find(vl_server *srv, uid_t uid);
void vld_uid_forget(vl_server *srv, vld_uid_use *u);
/* A connection waits for memory: settle every connection every few ms until memory fits. */
void vl_server_watch_memory(vl_server *srv);
/* Work was queued: probe idle connections for hung-up peers until the pool is empty. */
void vl_server_watch_hangups(vl_server *srv);

/* conn.c */
vl_conn *vl_conn_new(vl_server *srv);
/* Starts reading an accepted, admitted connection. */
void vl_conn_start(vl_conn *c);
/* Queues an error response with id null. */
void vl_conn_send_error(vl_conn *c, const vl_error *err);
/* Sends an error response with id null and closes the connection once it is written. */
void vl_conn_refuse(vl_conn *c, const vl_error *err);
/* Queues a response frame; takes json (malloc'd, or static when json_static) and payload. */
void vl_conn_send(vl_conn *c, char *json, size_t json_len, bool json_static, vl_buf *payload);
/* Re-evaluates reading, leftover input and closing after any change of state. */
void vl_conn_settle(vl_conn *c);
void vl_conn_close(vl_conn *c);
void vl_conn_ref(vl_conn *c);
void vl_conn_unref(vl_conn *c);
/* Closes c when its peer has hung up (nothing can be written any more). */
void vl_conn_probe_hangup(vl_conn *c);

/* dispatch.c */
/* Takes frame (a complete request) and answers it exactly once, via the thread pool. */
void vl_dispatch_frame(vl_conn *c, vl_frame *frame);
/* Cancels c's requests that wait for a worker; their after_work frees them unanswered. */
void vl_dispatch_cancel(vl_conn *c);
/* The drain timed out: c's requests still queued on the pool are answered -32007 (shutting
 * down) instead of run; those already running finish and are answered. */
void vl_dispatch_expire(vl_conn *c);

#endif
