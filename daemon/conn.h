/* conn.h - one client connection, a handle with callbacks in the manner of libuv: it reads
 * bytes into frames and hands each whole frame to its owner, writes response frames, applies
 * back-pressure and the idle timeout, and closes. It knows nothing of what a frame asks for,
 * of the server or of the thread pool: the owner (server.c) sets the callbacks, and whoever
 * works on a frame holds the connection (vld_conn_hold) until it answered.
 *
 * Lifetimes: a connection embeds its two handles (the pipe and the idle timer) and is
 * reference counted: one reference for the handles (dropped when both close callbacks ran),
 * one per request held, one per write not yet called back. It is freed when the count reaches
 * zero (on_free first), so work finishing after the client left touches valid memory and
 * simply drops its response. Only the event loop thread calls these functions. */
#ifndef VIEWLOWERD_CONN_H
#define VIEWLOWERD_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "viewlower/buf.h"
#include "viewlower/frame.h"

#define VLD_READ_BUF_SIZE 65536
#define VLD_SMALL_FRAME 4096 /* JSON + payload bytes parsed on the loop, admitted at once */
/* The owner hears of a connection's unsent responses in steps of this much (on_unsent), so a
 * small response written at once costs no shared lock; its count is off by less per connection. */
#define VLD_UNSENT_STEP ((uint64_t)64 << 10)

typedef struct vld_conn vld_conn;

/* A loop's passes over its connections. Between two looks at its sockets (one pass), the
 * frames read from all connections together get at most VLD_PASS_NS of the loop, and one
 * connection at most VLD_PASS_FRAMES frames in a row; each connection always gets one frame per
 * pass. A connection stopped so keeps its unread bytes and goes on in the next pass (an idle
 * handle), after the loop has looked at every socket: however many small requests a client
 * pipelines (a 64 KiB read holds 1,150 pings or 3,800 one-byte invalid requests, each answered
 * on the loop), the others wait for at most one pass. One per loop, on its thread. */
/* 1 ms: at 0.5 ms the bench's 16 clients pipelining 4 small lowerings each (answered on the
 * loop, 10-20 us apiece) ran out of pass at about half their frames, and the extra passes cost
 * a tenth of the rate (53k/s against 58k/s unbounded, four alternating runs; 1 ms: 58k/s). */
#define VLD_PASS_NS 1000000
#define VLD_PASS_FRAMES 64
typedef struct vld_turn {
  uv_idle_t resume;    /* runs the connections left for the next pass */
  uv_prepare_t passes; /* counts passes: a pass begins before each look at the sockets */
  uint64_t pass;       /* the current pass */
  uint64_t timed_pass; /* the pass whose work began at start_ns */
  uint64_t start_ns;
  vld_conn *next; /* connections left for the next pass, in order */
  vld_conn *last;
} vld_turn;

/* Starts t's handles on loop (the idle handle keeps it alive while a connection waits). */
void vld_turn_init(vld_turn *t, uv_loop_t *loop);
/* Closes t's handles; no connection may be left on it (each holds a reference until its next
 * pass runs, so the last connection is freed only after that). */
void vld_turn_close(vld_turn *t);

typedef struct vld_conn_callbacks {
  /* A whole frame: the callee owns it and answers it exactly once (vld_conn_send). */
  void (*on_frame)(vld_conn *c, vl_frame *frame);
  /* Closing begins: requests not started yet will never be read, cancel them. */
  void (*on_closing)(vld_conn *c);
  /* Both handles are closed: the socket is gone (work may still hold c). */
  void (*on_closed)(vld_conn *c);
  /* The last reference is gone; c is freed right after. */
  void (*on_free)(vld_conn *c);
  /* May c's next frame, of bytes (over VLD_SMALL_FRAME, within half the budget), be received
   * now? The owner keeps the waiting connections in a fair queue; false: c waits. true: the
   * bytes are counted already (vld_mem_charge) for the body the decoder allocates next. */
  bool (*admit_memory)(vld_conn *c, uint64_t bytes);
  /* c stopped reading until memory is released: settle it again later. */
  void (*on_wait_memory)(vld_conn *c);
  /* May c, which has responses its peer has not taken yet, go on being read? false while memory
   * is short for it (the owner's rule: the budget, the share of c's user); then c waits and
   * on_wait_memory is called. */
  bool (*memory_allows)(vld_conn *c);
  /* The memory of c's unsent responses went from bytes to bytes (from: as told last). Told in
   * steps of VLD_UNSENT_STEP, and always once all are written; false: not counted (out of
   * memory), told again at the next change. */
  bool (*on_unsent)(vld_conn *c, uint64_t from, uint64_t to);
  /* The frame stream broke (err says how), just before the error is answered. */
  void (*on_stream_error)(vld_conn *c, const vl_error *err);
  /* c's pass ended with whole frames still buffered: they wait for the next pass (vld_turn). */
  void (*on_yield)(vld_conn *c);
} vld_conn_callbacks;

typedef struct vld_conn_limits {
  uint64_t max_frame_bytes;
  uint32_t max_inflight;    /* requests held before reading stops */
  uint64_t max_write_queue; /* memory of unsent responses before reading stops */
  uint64_t idle_timeout_ms; /* 0: never */
} vld_conn_limits;

struct vld_conn {
  uv_pipe_t pipe;
  uv_timer_t idle;
  const vld_conn_limits *lim;
  const vld_conn_callbacks *cb;
  vld_turn *turn; /* its loop's */
  /* The owner's: */
  void *owner;
  void *user;                   /* whoever holds requests of c (the work list) */
  struct vld_conn *prev, *next; /* the owner's list of connections */
  uint64_t serial;              /* for logs */
  pid_t pid;
  uid_t uid;
  gid_t gid;
  bool counted; /* counts against the owner's limits (not a refused peer) */
  bool share_paused; /* not read: its user is at its memory share (counted once per pause) */
  /* The connection's own: */
  vl_frame_decoder dec;
  uint8_t *rbuf;   /* VLD_READ_BUF_SIZE bytes, read into only while nothing is left over */
  size_t rbuf_off; /* unconsumed bytes are rbuf[rbuf_off..rbuf_len) */
  size_t rbuf_len;
  unsigned refs;
  unsigned handles_open;
  uint32_t inflight;    /* requests held (vld_conn_hold) */
  uint32_t writes;      /* responses queued and not yet called back */
  uint64_t write_bytes; /* the memory they hold */
  uint64_t unsent_told; /* write_bytes as the owner was last told (on_unsent) */
  /* Responses queued while the frames of one read are dispatched, written together after
   * (one write call, one wake-up of the client for a pipelined batch): */
  bool corked;
  struct out_msg *cork_head, *cork_tail;
  /* The owner's memory queue (admit_memory): */
  bool mem_queued;
  uint64_t mem_ticket;   /* place in the queue: fair across users, see server.c */
  uint64_t mem_since_ms; /* when the frame began to wait (uv_now) */
  struct vld_conn *mem_prev, *mem_next;
  /* Frames whose header had arrived when the drain began, not yet received whole. */
  uint32_t drain_frames;
  bool started;
  bool reading;
  bool yielded;              /* on turn's list for the next pass */
  struct vld_conn *yield_next;
  bool input_done; /* no more frames will be read: EOF, broken framing or refused peer */
  bool draining;   /* read nothing new once the frames already buffered are served */
  bool closing;
};

/* A connection on loop, not yet accepted into; NULL on out-of-memory. lim, cb and turn (the
 * loop's) outlive it. */
vld_conn *vld_conn_new(uv_loop_t *loop, const vld_conn_limits *lim, const vld_conn_callbacks *cb,
                       vld_turn *turn, void *owner);
/* Starts reading an accepted, admitted connection. */
void vld_conn_start(vld_conn *c);
/* Queues an error response with id null. */
void vld_conn_send_error(vld_conn *c, const vl_error *err);
/* Sends an error response with id null and closes the connection once it is written. */
void vld_conn_refuse(vld_conn *c, const vl_error *err);
/* Queues a response frame; takes json (malloc'd, or static when json_static) and payload. */
void vld_conn_send(vld_conn *c, char *json, size_t json_len, bool json_static, vl_buf *payload);
/* vld_conn_send of a payload that owner holds (its bytes lie inside the malloc'd block owner,
 * such as the request frame a view_copy lent them from): owner, not payload, is freed once the
 * frame is written. owner NULL: vld_conn_send. */
void vld_conn_send_owned(vld_conn *c, char *json, size_t json_len, bool json_static,
                         vl_buf *payload, void *owner);
/* Releases a response payload (NULL: none): owner, the block its bytes lie in, or (owner NULL)
 * the payload's own block; payload is left empty. */
void vld_payload_free(vl_buf *payload, void *owner);
/* A request of c is being worked on / was answered or dropped (reference, --max-inflight). */
void vld_conn_hold(vld_conn *c);
void vld_conn_release(vld_conn *c);
/* Re-evaluates reading, leftover input and closing after any change of state. */
void vld_conn_settle(vld_conn *c);
/* Shutdown: every frame whose header has arrived is received to its end and served (so is any
 * other frame already whole in the read buffer); nothing else is read; closes once drained. */
void vld_conn_drain(vld_conn *c);
/* The drain timed out: a frame still being received (or waiting for memory) is answered -32007
 * (with its id when its JSON is in, else id null) and the connection closes once that is
 * written. */
void vld_conn_drain_expired(vld_conn *c);
/* Is a frame of c still to be received for the drain? */
bool vld_conn_drain_pending(const vld_conn *c);
void vld_conn_close(vld_conn *c);
void vld_conn_ref(vld_conn *c);
void vld_conn_unref(vld_conn *c);
/* Closes c when its peer has hung up (nothing can be written any more). */
void vld_conn_probe_hangup(vld_conn *c);

#endif
