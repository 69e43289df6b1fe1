/* conn.c - one client connection: reading bytes into frames, writing response frames,
 * back-pressure, idle timeout and close.
 *
 * Reading: libuv reads into the connection's fixed buffer; the bytes are fed to the frame
 * decoder, and each whole frame goes to the owner (on_frame). When the in-flight or write-queue limit is
 * hit, reading stops and the unconsumed rest of the buffer is kept; vld_conn_settle resumes
 * from it once responses went out. Likewise when the loop's pass has no room left for the
 * connection (vld_turn, conn.h): the rest of the buffer waits for the next pass. Memory per
 * connection is thus bounded by one read buffer, one partial frame, --max-inflight requests and
 * the write-queue bound.
 * Closing: a connection whose input is done (EOF, broken framing, refused, shutdown) closes
 * once nothing is in flight and every write was called back. A peer that is really gone
 * (read error, failed write, or an EOF after which the socket reports a hang-up) closes the
 * connection at once, which cancels its queued requests. An EOF alone is not enough: a peer
 * that only shut down its writing side is still reading and gets every response. */
#include "conn.h"

#include <malloc.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "log.h"
#include "memory.h"
#include "wire/envelope.h"

typedef struct out_msg {
  uv_write_t req;
  vld_conn *conn;
  uint8_t header[VL_FRAME_HEADER_SIZE];
  char *json;
  bool json_static;
  size_t json_len;
  vl_buf payload;
  void *owner; /* the block payload's bytes lie in, freed instead of it; NULL: payload's own */
  uint64_t bytes;
  struct out_msg *next; /* the rest of a batch written by this message's request */
} out_msg;

enum { BATCH_MAX = 16 }; /* responses per write call */

/* A frame's body is allocated only when it fits the memory budget; until then the connection
 * is not read (back-pressure). A frame over half the budget is refused outright: working on
 * it would need at least as much again. Small frames (pings, stats) are always taken. */
static vl_frame_admission admit_frame(void *ctx, uint64_t bytes) {
  vld_conn *c = ctx;
  if (bytes <= VLD_SMALL_FRAME) {
    return VL_FRAME_ADMIT; /* health checks never wait; bounded by --max-inflight each */
  }
  if (bytes > vld_mem_budget() / 2) {
    return VL_FRAME_REFUSE;
  }
  if (c->cb->admit_memory(c, bytes)) {
    return VL_FRAME_ADMIT;
  }
  c->cb->on_wait_memory(c);
  return VL_FRAME_WAIT;
}

vld_conn *vld_conn_new(uv_loop_t *loop, const vld_conn_limits *lim, const vld_conn_callbacks *cb,
                       vld_turn *turn, void *owner) {
  vld_conn *c = calloc(1, sizeof *c);
  uint8_t *rbuf = malloc(VLD_READ_BUF_SIZE);
  if (c == NULL || rbuf == NULL) {
    free(c);
    free(rbuf);
    return NULL;
  }
  c->lim = lim;
  c->cb = cb;
  c->turn = turn;
  c->owner = owner;
  c->rbuf = rbuf;
  c->refs = 1; /* the handles */
  vl_frame_decoder_init(&c->dec, lim->max_frame_bytes);
  c->dec.admit = admit_frame;
  c->dec.admit_ctx = c;
  uv_pipe_init(loop, &c->pipe, 0);
  uv_timer_init(loop, &c->idle);
  c->pipe.data = c;
  c->idle.data = c;
  c->handles_open = 2;
  return c;
}

static void conn_free(vld_conn *c) {
  c->cb->on_free(c);
  vl_frame_decoder_free(&c->dec);
  free(c->rbuf);
  free(c);
}

void vld_conn_ref(vld_conn *c) {
  c->refs++;
}

/* Drops n references at once (a written batch held one per message). */
static void unref_n(vld_conn *c, unsigned n) {
  c->refs -= n;
  if (c->refs == 0) {
    conn_free(c);
  }
}

void vld_conn_unref(vld_conn *c) {
  unref_n(c, 1);
}

static void on_handle_closed(uv_handle_t *h) {
  vld_conn *c = h->data;
  if (--c->handles_open == 0) {
    /* The socket is gone: work still running holds c only to be freed, never answered. */
    c->cb->on_closed(c);
    vld_conn_unref(c);
  }
}

void vld_conn_close(vld_conn *c) {
  if (c->closing) {
    return;
  }
  c->closing = true;
  c->input_done = true;
  c->reading = false;
  vld_log_debug("conn %llu: closed (%u in flight)", (unsigned long long)c->serial, c->inflight);
  c->cb->on_closing(c); /* nobody will read the answers of work that has not started */
  uv_close((uv_handle_t *)&c->pipe, on_handle_closed);
  uv_close((uv_handle_t *)&c->idle, on_handle_closed);
}

/* Restarts the idle timer: bytes arrived, or a response was queued or delivered. */
static void mark_activity(vld_conn *c) {
  if (c->started && !c->closing && c->lim->idle_timeout_ms > 0) {
    uv_timer_again(&c->idle);
  }
}

/* ---- writing ------------------------------------------------------------------------------ */

void vld_payload_free(vl_buf *payload, void *owner) {
  if (owner == NULL) {
    vl_buf_free(payload);
    return;
  }
  free(owner);
  if (payload != NULL) {
    memset(payload, 0, sizeof *payload);
  }
}

static void out_msg_free(out_msg *m) {
  if (!m->json_static) {
    free(m->json);
  }
  vld_payload_free(&m->payload, m->owner);
  free(m);
}

/* Tells the owner what c's unsent responses hold when that moved by VLD_UNSENT_STEP or more
 * since it was last told, or all are written: a response of a few hundred bytes, written at
 * once, takes no shared lock. */
static void tell_unsent(vld_conn *c) {
  uint64_t now = c->write_bytes, told = c->unsent_told;
  uint64_t moved = now > told ? now - told : told - now;
  if (moved == 0 || (now != 0 && moved < VLD_UNSENT_STEP)) {
    return;
  }
  if (c->cb->on_unsent(c, told, now)) {
    c->unsent_told = now;
  }
}

/* Frees the messages of the batch m (uncounted: writes, write_bytes); returns how many. */
static unsigned batch_free(out_msg *m) {
  unsigned n = 0;
  while (m != NULL) {
    out_msg *next = m->next;
    vld_conn *c = m->conn;
    c->writes--;
    c->write_bytes -= m->bytes;
    out_msg_free(m);
    m = next;
    n++;
  }
  return n;
}

static void on_written(uv_write_t *req, int status) {
  out_msg *m = req->data;
  vld_conn *c = m->conn;
  unsigned n = batch_free(m);
  tell_unsent(c);
  if (status == 0) {
    mark_activity(c);
  }
  if (status < 0 && !c->closing) {
    vld_log_debug("conn %llu: write failed: %s", (unsigned long long)c->serial, uv_strerror(status));
    vld_conn_close(c);
  }
  vld_conn_settle(c);
  unref_n(c, n);
}

/* Allocates the message; NULL on out-of-memory (then json and payload were released). */
static out_msg *out_msg_new(vld_conn *c, char *json, size_t json_len, bool json_static,
                            vl_buf *payload, void *owner) {
  out_msg *m = calloc(1, sizeof *m);
  if (m == NULL) {
    if (!json_static) {
      free(json);
    }
    vld_payload_free(payload, owner);
    return NULL;
  }
  m->conn = c;
  m->json = json;
  m->json_static = json_static;
  if (payload != NULL) {
    m->payload = *payload;
    m->owner = owner;
    memset(payload, 0, sizeof *payload);
  }
  vl_frame_header_encode(m->header, (uint32_t)json_len, m->payload.len);
  /* What the queued response costs in memory, not its frame bytes: a 60-byte ping response
   * holds several times that in blocks (this message and its write request, the text). */
  m->bytes = malloc_usable_size(m) + (json_static ? 0 : malloc_usable_size(json)) +
             (m->owner != NULL          ? malloc_usable_size(m->owner)
              : m->payload.data != NULL ? malloc_usable_size(m->payload.data)
                                        : 0);
  m->req.data = m;
  return m;
}

/* Writes what the socket takes of bufs[0..n) at once (nothing when other writes are queued:
 * libuv keeps them in order) and drops it from bufs; returns how many buffers are left. A batch
 * written whole here needs no write request: uv_write's completion, even of a write done at
 * once, comes a loop iteration later and re-arms the socket's epoll interest (one epoll_ctl
 * per response batch, as many as the reads, under 16 clients pipelining small lowerings). */
static unsigned write_now(vld_conn *c, uv_buf_t *bufs, unsigned n) {
  int k = uv_try_write((uv_stream_t *)&c->pipe, bufs, n);
  size_t done = k > 0 ? (size_t)k : 0;
  unsigned i = 0;
  while (i < n && done >= bufs[i].len) {
    done -= bufs[i++].len;
  }
  if (i < n) {
    bufs[i].base += done;
    bufs[i].len -= done;
  }
  memmove(bufs, bufs + i, (n - i) * sizeof *bufs);
  return n - i;
}

/* Writes the batch first..(up to BATCH_MAX messages, linked): at once where the socket takes
 * it all (the caller settles the connection afterwards, as on_written would), else the rest
 * with one write request, its first message's. */
static void write_batch(vld_conn *c, out_msg *first) {
  uv_buf_t bufs[3 * BATCH_MAX] = {{0}};
  unsigned n = 0;
  for (out_msg *m = first; m != NULL; m = m->next) {
    bufs[n++] = (uv_buf_t){.base = (char *)m->header, .len = VL_FRAME_HEADER_SIZE};
    bufs[n++] = (uv_buf_t){.base = m->json, .len = m->json_len};
    if (m->payload.len > 0) {
      bufs[n++] = (uv_buf_t){.base = (char *)m->payload.data, .len = m->payload.len};
    }
  }
  if (!c->closing && (n = write_now(c, bufs, n)) == 0) {
    mark_activity(c);
    unref_n(c, batch_free(first)); /* its handles still hold c */
    return;
  }
  int rc = c->closing ? UV_ECANCELED
                      : uv_write(&first->req, (uv_stream_t *)&c->pipe, bufs, n, on_written);
  if (rc != 0) {
    if (!c->closing) {
      vld_log_debug("conn %llu: write: %s", (unsigned long long)c->serial, uv_strerror(rc));
      vld_conn_close(c);
    }
    unref_n(c, batch_free(first)); /* its handles still hold c: closing is asynchronous */
  }
}

/* Writes the responses queued while corked, BATCH_MAX per write call, in order. */
static void flush_cork(vld_conn *c) {
  while (c->cork_head != NULL) {
    out_msg *first = c->cork_head, *last = first;
    for (unsigned k = 1; k < BATCH_MAX && last->next != NULL; k++) {
      last = last->next;
    }
    c->cork_head = last->next;
    if (c->cork_head == NULL) {
      c->cork_tail = NULL;
    }
    last->next = NULL;
    write_batch(c, first);
  }
  tell_unsent(c);
}

void vld_conn_send(vld_conn *c, char *json, size_t json_len, bool json_static, vl_buf *payload) {
  vld_conn_send_owned(c, json, json_len, json_static, payload, NULL);
}

void vld_conn_send_owned(vld_conn *c, char *json, size_t json_len, bool json_static,
                         vl_buf *payload, void *owner) {
  if (c->closing) {
    if (!json_static) {
      free(json);
    }
    vld_payload_free(payload, owner);
    return;
  }
  out_msg *m = out_msg_new(c, json, json_len, json_static, payload, owner);
  if (m == NULL) {
    vld_log_error("conn %llu: out of memory for a response; closing", (unsigned long long)c->serial);
    vld_conn_close(c);
    return;
  }
  m->json_len = json_len;
  c->writes++;
  c->write_bytes += m->bytes;
  vld_conn_ref(c);
  mark_activity(c);
  if (c->cork_tail != NULL) {
    c->cork_tail->next = m;
  } else {
    c->cork_head = m;
  }
  c->cork_tail = m;
  if (!c->corked) {
    flush_cork(c);
  }
}

void vld_conn_send_error(vld_conn *c, const vl_error *err) {
  size_t len = 0;
  char *text = vl__rpc_error_text(NULL, err, &len);
  if (text == NULL) {
    vld_conn_send(c, (char *)vl__rpc_nomem_response, vl__rpc_nomem_response_len, true, NULL);
    return;
  }
  vld_conn_send(c, text, len, false, NULL);
}

void vld_conn_refuse(vld_conn *c, const vl_error *err) {
  c->input_done = true;
  vld_conn_send_error(c, err);
  vld_conn_settle(c);
}

/* ---- reading ------------------------------------------------------------------------------ */

/* Reading stops at the connection's limits, while its next frame waits for memory, and, for a
 * connection with responses it has not taken yet (one that pipelines requests without reading
 * the answers), while the owner finds memory short for it (memory_allows: the daemon over its
 * budget, or its user at its share; the owner settles it again, on_wait_memory). */
static bool over_limits(vld_conn *c) {
  if (c->inflight >= c->lim->max_inflight || c->write_bytes >= c->lim->max_write_queue ||
      vl_frame_decoder_waiting(&c->dec)) {
    return true;
  }
  if (c->writes > 0 && !c->cb->memory_allows(c)) {
    c->cb->on_wait_memory(c);
    return true;
  }
  return false;
}

/* A broken frame stream: answer with id null (docs/protocol.md, Frames), read nothing more, close
 * when done. */
static void frame_error(vld_conn *c, vl_error *err) {
  if (err->code == VL_ERR_PROTOCOL) {
    err->code = VL_ERR_INVALID_REQUEST; /* bad magic: -32600 invalid_request on the wire */
  }
  c->cb->on_stream_error(c, err);
  vld_log_info("conn %llu (uid %u, pid %d): %s; closing", (unsigned long long)c->serial,
              (unsigned)c->uid, (int)c->pid, err->message);
  c->input_done = true;
  c->rbuf_off = c->rbuf_len;
  vld_conn_send_error(c, err);
}

/* A whole frame to the owner; during a drain it may be one of those the drain waits for. */
static void deliver(vld_conn *c, vl_frame *frame) {
  if (c->drain_frames > 0) {
    c->drain_frames--;
  }
  c->cb->on_frame(c, frame);
}

/* Asks again for the memory of a frame that waits for it (the decoder asks when fed). */
static void retry_admission(vld_conn *c) {
  size_t used = 0;
  bool ready = false;
  vl_frame frame;
  vl_error err;
  if (vl_frame_decoder_feed(&c->dec, NULL, 0, &used, &ready, &frame, &err) != VL_OK) {
    frame_error(c, &err);
  } else if (ready) {
    deliver(c, &frame);
  }
}

/* ---- passes ------------------------------------------------------------------------------ */

static void on_pass(uv_prepare_t *p) {
  vld_turn *t = p->data;
  t->pass++;
}

/* The connections left for this pass go on, each once, in the order they were left; those that
 * stop again wait for the next pass. */
static void on_resume(uv_idle_t *h) {
  vld_turn *t = h->data;
  vld_conn *c = t->next;
  t->next = t->last = NULL;
  t->pass++; /* a pass of its own: the sockets were looked at since these were left */
  while (c != NULL) {
    vld_conn *next = c->yield_next;
    c->yield_next = NULL;
    c->yielded = false;
    vld_conn_settle(c);
    vld_conn_unref(c);
    c = next;
  }
  if (t->next == NULL) {
    uv_idle_stop(h);
  }
}

void vld_turn_init(vld_turn *t, uv_loop_t *loop) {
  memset(t, 0, sizeof *t);
  uv_idle_init(loop, &t->resume);
  uv_prepare_init(loop, &t->passes);
  t->resume.data = t;
  t->passes.data = t;
  uv_prepare_start(&t->passes, on_pass);
  uv_unref((uv_handle_t *)&t->passes);
}

void vld_turn_close(vld_turn *t) {
  if (!uv_is_closing((uv_handle_t *)&t->resume)) {
    uv_close((uv_handle_t *)&t->resume, NULL);
    uv_close((uv_handle_t *)&t->passes, NULL);
  }
}

/* May c go on with another frame, having taken frames in a row in this call? The first frame
 * is always taken; the pass's clock starts with the first frame anybody takes in it. */
static bool pass_has_room(vld_conn *c, unsigned frames) {
  vld_turn *t = c->turn;
  uint64_t now = uv_hrtime();
  if (t->timed_pass != t->pass) {
    t->timed_pass = t->pass;
    t->start_ns = now;
  }
  return frames == 0 || (frames < VLD_PASS_FRAMES && now - t->start_ns < VLD_PASS_NS);
}

/* Leaves c's buffered frames for the next pass (it holds a reference until then). */
static void yield_pass(vld_conn *c) {
  vld_turn *t = c->turn;
  if (c->yielded) {
    return;
  }
  c->yielded = true;
  vld_conn_ref(c);
  if (t->last != NULL) {
    t->last->yield_next = c;
  } else {
    t->next = c;
  }
  t->last = c;
  uv_idle_start(&t->resume, on_resume);
  c->cb->on_yield(c);
}

/* Feeds buffered bytes to the decoder and dispatches whole frames until the bytes run out, a
 * limit is hit or the pass has no more room for c (then the rest waits for the next pass). */
static void process_input(vld_conn *c) {
  bool outer = !c->corked; /* the responses answered meanwhile go out together */
  unsigned frames = 0;
  c->corked = true;
  while (c->rbuf_off < c->rbuf_len && !c->input_done && !c->yielded && !over_limits(c)) {
    if (!pass_has_room(c, frames)) {
      yield_pass(c);
      break;
    }
    size_t used = 0;
    bool ready = false;
    vl_frame frame;
    vl_error err;
    vl_status s = vl_frame_decoder_feed(&c->dec, c->rbuf + c->rbuf_off, c->rbuf_len - c->rbuf_off,
                                        &used, &ready, &frame, &err);
    c->rbuf_off += used;
    if (s != VL_OK) {
      frame_error(c, &err);
      break;
    }
    if (ready) {
      deliver(c, &frame);
      frames++;
    }
  }
  if (outer) {
    c->corked = false;
    flush_cork(c);
  }
}

/* A large payload being received is read straight into the frame's body (no copy through the
 * read buffer); everything else goes through the read buffer. Reading is on only while the read
 * buffer holds nothing left over, so bytes stay in order. */
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)suggested;
  vld_conn *c = h->data;
  size_t room = 0;
  uint8_t *direct = vl_frame_decoder_direct(&c->dec, &room);
  if (direct != NULL && room >= VLD_READ_BUF_SIZE) {
    buf->base = (char *)direct;
    buf->len = room;
    return;
  }
  buf->base = (char *)c->rbuf;
  buf->len = VLD_READ_BUF_SIZE;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  vld_conn *c = s->data;
  if (nread > 0 && buf->base != (char *)c->rbuf) {
    bool ready = false;
    vl_frame frame;
    vl_frame_decoder_commit(&c->dec, (size_t)nread, &ready, &frame);
    mark_activity(c);
    if (ready) {
      deliver(c, &frame);
    }
  } else if (nread > 0) {
    c->rbuf_off = 0;
    c->rbuf_len = (size_t)nread;
    mark_activity(c);
    process_input(c);
  } else if (nread < 0) {
    if (nread != UV_EOF) {
      vld_log_debug("conn %llu: read: %s", (unsigned long long)c->serial, uv_strerror((int)nread));
      vld_conn_close(c); /* ECONNRESET and the like: nothing can be written either */
      return;
    }
    if (!vl_frame_decoder_idle(&c->dec)) {
      vld_log_info("conn %llu: peer closed in the middle of a frame", (unsigned long long)c->serial);
    }
    c->input_done = true;
    vld_conn_probe_hangup(c); /* a full close, or only shutdown(SHUT_WR)? */
  }
  vld_conn_settle(c);
}

/* On a Unix stream socket, POLLHUP means the peer closed both directions (close() or
 * shutdown(SHUT_RDWR)): responses can no longer be delivered. A half-close sets only
 * POLLRDHUP, so such a peer keeps getting its responses. */
void vld_conn_probe_hangup(vld_conn *c) {
  uv_os_fd_t fd;
  if (c->closing || uv_fileno((uv_handle_t *)&c->pipe, &fd) != 0) {
    return;
  }
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  if (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)) != 0) {
    vld_log_debug("conn %llu: peer hung up with %u requests in flight",
                 (unsigned long long)c->serial, c->inflight);
    vld_conn_close(c);
  }
}

static void set_reading(vld_conn *c, bool on) {
  if (on == c->reading) {
    return;
  }
  int rc = on ? uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read)
              : uv_read_stop((uv_stream_t *)&c->pipe);
  if (rc != 0) {
    vld_log_warn("conn %llu: read start: %s", (unsigned long long)c->serial, uv_strerror(rc));
    vld_conn_close(c);
    return;
  }
  c->reading = on;
}

void vld_conn_settle(vld_conn *c) {
  if (c->closing) {
    return;
  }
  if (!c->input_done && vl_frame_decoder_waiting(&c->dec)) {
    retry_admission(c);
  }
  process_input(c);
  bool leftover = c->rbuf_off < c->rbuf_len;
  if (c->draining && !leftover && c->drain_frames == 0) {
    c->input_done = true; /* the frames begun before the drain were served; read nothing new */
  }
  set_reading(c, !c->input_done && !leftover && !over_limits(c));
  if (c->input_done && !leftover && c->inflight == 0 && c->writes == 0) {
    vld_conn_close(c);
  }
}

/* Does the socket hold bytes not yet read, or room for a response still queued? Timers run
 * before I/O in each loop iteration, so after the daemon was stopped (SIGSTOP, a frozen cgroup,
 * a paused VM) the idle timer fires before the requests that arrived meanwhile are read: idle
 * means nothing to read and nothing writable, not merely no callback. */
static bool peer_is_active(vld_conn *c) {
  uv_os_fd_t fd;
  int avail = 0;
  if (uv_fileno((uv_handle_t *)&c->pipe, &fd) != 0) {
    return false;
  }
  if (c->reading && ioctl(fd, FIONREAD, &avail) == 0 && avail > 0) {
    return true;
  }
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  return c->writes > 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) != 0 &&
         (p.revents & (POLLHUP | POLLERR)) == 0;
}

static void answer_unreceived(vld_conn *c, const char *message);

/* No bytes arrived and no response was queued or delivered for a whole idle period. With
 * requests in flight the client is waiting for us: look again a period later. With responses
 * still unsent, the client has stopped reading them. */
static void on_idle(uv_timer_t *t) {
  vld_conn *c = t->data;
  if (vl_frame_decoder_waiting(&c->dec) && !c->input_done && c->inflight == 0 &&
      uv_now(c->pipe.loop) - c->mem_since_ms >= c->lim->idle_timeout_ms) {
    /* Its frame waited a whole idle period for memory: answer rather than hold the slot. */
    vl_error err;
    vl_error_set(&err, VL_ERR_OVERLOADED, "",
                 "overloaded: a frame of %llu bytes waited %llu ms for memory (--max-memory) "
                 "without being received; retry later",
                 (unsigned long long)c->dec.hdr.json_len + c->dec.hdr.payload_len,
                 (unsigned long long)c->lim->idle_timeout_ms);
    vld_log_info("conn %llu (uid %u): %s; closing", (unsigned long long)c->serial,
                 (unsigned)c->uid, err.message);
    c->cb->on_stream_error(c, &err);
    c->drain_frames = 0;
    vld_conn_refuse(c, &err);
    return;
  }
  if (c->inflight > 0 || vl_frame_decoder_waiting(&c->dec) || peer_is_active(c)) {
    return; /* working for it, waiting for memory for its frame, or bytes to read */
  }
  if (vld_conn_drain_pending(c)) {
    /* A frame begun before the signal is owed an answer (docs/protocol.md, "Shutdown"): the
     * idle period ends its wait as the drain timeout would, with -32007, not a silent close
     * (an idle timeout shorter than what was left of the drain closed it unanswered). */
    vld_log_info("conn %llu (uid %u): idle for %llu ms in the middle of a frame while draining",
                 (unsigned long long)c->serial, (unsigned)c->uid,
                 (unsigned long long)c->lim->idle_timeout_ms);
    answer_unreceived(c, "shutting down: the client sent nothing for the idle timeout before this "
                         "request was received whole");
    return;
  }
  const char *why = c->writes > 0                     ? " and not reading its responses"
                    : !vl_frame_decoder_idle(&c->dec) ? " in the middle of a frame"
                                                      : "";
  vld_log_info("conn %llu (uid %u): idle for %llu ms%s; closing", (unsigned long long)c->serial,
              (unsigned)c->uid, (unsigned long long)c->lim->idle_timeout_ms, why);
  vld_conn_close(c);
}

void vld_conn_hold(vld_conn *c) {
  c->inflight++;
  vld_conn_ref(c);
}

void vld_conn_release(vld_conn *c) {
  c->inflight--;
  vld_conn_settle(c);
  vld_conn_unref(c);
}

/* How many frames have begun to arrive (a whole header read) and are not yet received: the one
 * in the decoder, then each whose header is whole in the unconsumed read buffer. */
static uint32_t frames_begun(const vld_conn *c) {
  const vl_frame_decoder *d = &c->dec;
  if (d->failed != VL_OK || c->input_done) {
    return 0;
  }
  uint8_t h[VL_FRAME_HEADER_SIZE];
  uint64_t p = c->rbuf_off, end = c->rbuf_len;
  uint32_t n = 0;
  vl_frame_header hdr;
  vl_error err;
  if (d->header_got == VL_FRAME_HEADER_SIZE) {
    n = 1;
    p += (uint64_t)d->hdr.json_len + d->hdr.payload_len - (d->body != NULL ? d->body_got : 0);
  } else if (d->header_got > 0) {
    size_t need = VL_FRAME_HEADER_SIZE - d->header_got;
    if (end - p < need) {
      return 0;
    }
    memcpy(h, d->header, d->header_got);
    memcpy(h + d->header_got, c->rbuf + p, need);
    if (vl_frame_header_decode(h, &hdr, &err) != VL_OK) {
      return 0;
    }
    n = 1;
    p += need + (uint64_t)hdr.json_len + hdr.payload_len;
  }
  while (p < end && end - p >= VL_FRAME_HEADER_SIZE &&
         vl_frame_header_decode(c->rbuf + p, &hdr, &err) == VL_OK) {
    n++;
    p += VL_FRAME_HEADER_SIZE + (uint64_t)hdr.json_len + hdr.payload_len;
  }
  return n;
}

void vld_conn_drain(vld_conn *c) {
  c->draining = true;
  c->drain_frames = frames_begun(c);
  if (c->drain_frames > 0) {
    vld_log_debug("conn %llu: draining: %u frames begun are received to their end",
                  (unsigned long long)c->serial, c->drain_frames);
  }
  vld_conn_settle(c);
}

bool vld_conn_drain_pending(const vld_conn *c) {
  return c->drain_frames > 0 && !c->input_done && !c->closing;
}

void vld_conn_drain_expired(vld_conn *c) {
  if (!vld_conn_drain_pending(c)) {
    return;
  }
  answer_unreceived(c, "shutting down: the drain timeout passed before this request was received "
                       "whole");
}

/* Answers the frame begun before the signal and not received whole -32007 (with its id once
 * that has arrived), reads nothing more, and lets the connection close after the answer. */
static void answer_unreceived(vld_conn *c, const char *message) {
  const vl_frame_decoder *d = &c->dec;
  cJSON *id = NULL;
  if (d->body != NULL) { /* as much of its JSON as is in: the id once that has arrived */
    id = vl__rpc_peek_id((const char *)d->body,
                         d->body_got < d->hdr.json_len ? d->body_got : d->hdr.json_len);
  }
  vl_error err;
  vl_error_set(&err, VL_ERR_SHUTTING_DOWN, "", "%s", message);
  size_t len = 0;
  char *text = vl__rpc_error_text(id, &err, &len);
  cJSON_Delete(id);
  c->drain_frames = 0;
  c->input_done = true;
  c->rbuf_off = c->rbuf_len;
  if (text != NULL) {
    vld_conn_send(c, text, len, false, NULL);
  } else {
    vld_conn_send(c, (char *)vl__rpc_nomem_response, vl__rpc_nomem_response_len, true, NULL);
  }
  vld_conn_settle(c);
}

void vld_conn_start(vld_conn *c) {
  c->started = true;
  uint64_t ms = c->lim->idle_timeout_ms;
  if (ms > 0) {
    uv_timer_start(&c->idle, on_idle, ms, ms);
  }
  vld_conn_settle(c);
}
