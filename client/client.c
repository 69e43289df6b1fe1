/* client.c - libviewlower-client: blocking JSON-RPC over the framed Unix socket protocol.
 *
 * The socket is non-blocking; every wait is a poll bounded by the call's deadline, so a call
 * never blocks longer than the client's timeout. Sends use sendmsg with MSG_NOSIGNAL (no
 * SIGPIPE reaches the application). A transport failure marks the client broken: the byte
 * stream may be mid-frame, so nothing more can be read or written on it.
 *
 * Reads go through a receive buffer of RECV_BUF_SIZE bytes: one recv takes whatever the socket
 * holds, often all the frames of a pipelined batch the daemon wrote at once, and the header,
 * JSON and payload of each response are served from it. Bytes in rbuf[rpos, rend) are the
 * stream's next bytes, read before the socket and before any poll for input; once a request
 * went out since the last bytes came in, the socket is polled before it is read. A wanted run at
 * least as long as the buffer (a large payload) that finds the buffer drained is received
 * straight into its destination, never through the buffer.
 *
 * Corked (vl_client_cork), requests are copied into a send buffer of SEND_BUF_SIZE bytes and go
 * out in one sendmsg when it fills, when the client is about to read from the socket (so it
 * never waits for a response to a request it still holds), when uncorked, or at close. A
 * request that does not fit an empty buffer is sent at once, after those queued before it. */
#include "viewlower/client.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "viewlower/frame.h"
#include "wire/envelope.h"

struct vl_client {
  int fd;
  int timeout_ms;
  uint64_t max_frame_bytes;
  uint64_t next_id;
  size_t pending; /* sent with vl_client_send, not yet received */
  bool broken;
  uint8_t *rbuf; /* RECV_BUF_SIZE bytes; rbuf[rpos, rend) received, not yet consumed */
  size_t rpos, rend;
  bool corked;
  uint8_t *wbuf; /* SEND_BUF_SIZE bytes once corked; wbuf[0, wlen) queued, not yet sent */
  size_t wlen;
  bool sent; /* bytes went out since the last recv that got some: the next recv polls first */
};

/* 64 KiB, allocated at connect: a pipelined batch of typical responses (a lowered graph's is a
 * few KiB) fits in one recv, and it is small beside the socket's own buffer (208 KiB by
 * default). Runs this long or longer are received in place. Dropped payloads pass through it
 * too (there is no scratch array on the stack). */
enum { RECV_BUF_SIZE = 65536 };

/* 64 KiB: sixteen pipelined lowerings of a few KiB each go out in one write. */
enum { SEND_BUF_SIZE = 65536 };

/* ---- deadlines and raw I/O ---------------------------------------------------------------- */

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Absolute deadline for a timeout, or -1 for none. */
static int64_t deadline_after(int timeout_ms) {
  return timeout_ms > 0 ? now_ms() + timeout_ms : -1;
}

/* Marks the client broken and reports "<what><detail>". */
static vl_status transport_fail(vl_client *c, vl_error *err, vl_status s, const char *what,
                                const char *detail) {
  c->broken = true;
  return vl_error_set(err, s, "", "%s%s", what, detail);
}

/* Waits until fd is ready for events or the deadline passes. */
static vl_status wait_ready(vl_client *c, short events, int64_t deadline, vl_error *err) {
  for (;;) {
    int wait = -1;
    if (deadline >= 0) {
      int64_t left = deadline - now_ms();
      if (left <= 0) {
        return transport_fail(c, err, VL_ERR_TIMEOUT, "timed out waiting for the daemon", "");
      }
      wait = left > 1000000 ? 1000000 : (int)left;
    }
    struct pollfd p = {.fd = c->fd, .events = events, .revents = 0};
    int n = poll(&p, 1, wait);
    if (n > 0) {
      return VL_OK;
    }
    if (n < 0 && errno != EINTR) {
      return transport_fail(c, err, VL_ERR_IO, "poll: ", strerror(errno));
    }
  }
}

/* Sends every byte of iov[0..n) (iov is consumed). */
static vl_status send_all(vl_client *c, struct iovec *iov, int n, int64_t deadline, vl_error *err) {
  while (n > 0) {
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        return transport_fail(c, err, VL_ERR_IO, "send: ", strerror(errno));
      }
      vl_status s = wait_ready(c, POLLOUT, deadline, err);
      if (s != VL_OK) {
        return s;
      }
      continue;
    }
    c->sent = true;
    size_t left = (size_t)w;
    while (n > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      iov++;
      n--;
    }
    if (n > 0) {
      iov->iov_base = (uint8_t *)iov->iov_base + left;
      iov->iov_len -= left;
    }
  }
  return VL_OK;
}

/* Sends the corked requests queued in wbuf. */
static vl_status flush_sends(vl_client *c, int64_t deadline, vl_error *err) {
  if (c->wlen == 0) {
    return VL_OK;
  }
  struct iovec iov = {c->wbuf, c->wlen};
  c->wlen = 0;
  return send_all(c, &iov, 1, deadline, err);
}

/* One recv of at most cap (> 0) bytes into p, waiting for input until the deadline; *got is
 * then at least 1. End of stream is a transport failure: it only happens mid-frame or where a
 * response is due. */
static vl_status recv_some(vl_client *c, void *p, size_t cap, size_t *got, int64_t deadline,
                           vl_error *err) {
  vl_status fs = flush_sends(c, deadline, err); /* never wait for answers to unsent requests */
  if (fs != VL_OK) {
    return fs;
  }
  /* Right after a send the answers are rarely there yet: a recv would only fail with EAGAIN
   * before the poll (a client pipelining small lowerings made one such recv per batch, a
   * fifth of its system calls). With no time left, the recv below still takes what is there,
   * as it always did. */
  if (c->sent && (deadline < 0 || deadline > now_ms())) {
    vl_status s = wait_ready(c, POLLIN, deadline, err);
    if (s != VL_OK) {
      return s;
    }
  }
  for (;;) {
    ssize_t r = recv(c->fd, p, cap, 0);
    if (r > 0) {
      c->sent = false;
      *got = (size_t)r;
      return VL_OK;
    }
    if (r == 0) {
      return transport_fail(c, err, VL_ERR_IO, "the daemon closed the connection", "");
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return transport_fail(c, err, VL_ERR_IO, "recv: ", strerror(errno));
    }
    vl_status s = wait_ready(c, POLLIN, deadline, err);
    if (s != VL_OK) {
      return s;
    }
  }
}

/* Refills the drained buffer with one recv. */
static vl_status fill(vl_client *c, int64_t deadline, vl_error *err) {
  c->rpos = 0;
  c->rend = 0;
  return recv_some(c, c->rbuf, RECV_BUF_SIZE, &c->rend, deadline, err);
}

/* Moves up to len buffered bytes to p (NULL: drops them); returns how many. */
static size_t take(vl_client *c, uint8_t *p, size_t len) {
  size_t n = c->rend - c->rpos;
  n = n < len ? n : len;
  if (p != NULL) {
    memcpy(p, c->rbuf + c->rpos, n);
  }
  c->rpos += n;
  return n;
}

/* Receives exactly len bytes into p, or drops them when p is NULL: the buffered ones first. */
static vl_status recv_exact(vl_client *c, void *p, size_t len, int64_t deadline, vl_error *err) {
  uint8_t *at = p;
  while (len > 0) {
    size_t n = 0;
    vl_status s = VL_OK;
    if (c->rpos < c->rend) {
      n = take(c, at, len);
    } else if (at != NULL && len >= RECV_BUF_SIZE) {
      s = recv_some(c, at, len, &n, deadline, err); /* in place: no second copy */
    } else {
      s = fill(c, deadline, err);
    }
    if (s != VL_OK) {
      return s;
    }
    at = at != NULL ? at + n : NULL;
    len -= n;
  }
  return VL_OK;
}

/* Reads len payload bytes into out (appended), or drops them when out is NULL. */
static vl_status recv_payload(vl_client *c, vl_buf *out, size_t len, int64_t deadline,
                              vl_error *err) {
  if (out == NULL) {
    return recv_exact(c, NULL, len, deadline, err);
  }
  size_t old = out->len;
  void *p = vl_buf_extend(out, len);
  if (p == NULL) {
    return transport_fail(c, err, VL_ERR_NOMEM, "cannot allocate the response payload", "");
  }
  vl_status s = recv_exact(c, p, len, deadline, err);
  if (s != VL_OK) {
    out->len = old;
  }
  return s;
}

/* ---- connecting ------------------------------------------------------------------------- */

/* The longest path a sockaddr_un holds (its sun_path keeps a terminating NUL). */
#define SOCKET_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

static vl_status path_too_long(size_t len, vl_error *err) {
  return vl_error_set(err, VL_ERR_INVALID_PARAMS, "",
                      "socket path is %zu bytes, longer than the %zu a Unix socket allows", len,
                      SOCKET_PATH_MAX);
}

static vl_status copy_path(char *buf, size_t n, const char *a, const char *b, vl_error *err) {
  size_t len = strlen(a) + strlen(b);
  if (len > SOCKET_PATH_MAX) {
    return path_too_long(len, err);
  }
  if (len >= n) {
    return vl_error_set(err, VL_ERR_INVALID_PARAMS, "",
                        "socket path is %zu bytes, more than the %zu-byte buffer holds", len, n);
  }
  snprintf(buf, n, "%s%s", a, b);
  return VL_OK;
}

vl_status vl_client_default_socket(char *buf, size_t n, vl_error *err) {
  const char *env = getenv("VIEWLOWER_SOCKET");
  if (env != NULL && env[0] != '\0') {
    return copy_path(buf, n, env, "", err);
  }
  if (geteuid() == 0) {
    return copy_path(buf, n, "/run/viewlower/viewlower.sock", "", err);
  }
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  if (xdg != NULL && xdg[0] != '\0') {
    return copy_path(buf, n, xdg, "/viewlower.sock", err);
  }
  return vl_error_set(err, VL_ERR_INVALID_PARAMS, "",
                      "no socket path: none given, VIEWLOWER_SOCKET and XDG_RUNTIME_DIR are "
                      "unset, and not running as root");
}

static vl_status open_socket(const char *path, struct sockaddr_un *sa, int *fd, vl_error *err) {
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  if (strlen(path) > SOCKET_PATH_MAX) {
    return path_too_long(strlen(path), err);
  }
  memcpy(sa->sun_path, path, strlen(path) + 1);
  *fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (*fd < 0) {
    return vl_error_set(err, VL_ERR_IO, "", "socket: %s", strerror(errno));
  }
  return VL_OK;
}

/* Sleeps ms, or less when the deadline is nearer; false when the deadline has passed. */
static bool backoff(int64_t deadline, int ms) {
  if (deadline >= 0) {
    int64_t left = deadline - now_ms();
    if (left <= 0) {
      return false;
    }
    ms = left < ms ? (int)left : ms;
  }
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  return true;
}

/* connect on a non-blocking AF_UNIX socket. A full listen backlog gives EAGAIN, and the socket
 * is then *not* connecting (unlike TCP's EINPROGRESS: polling it reports POLLOUT at once), so
 * connect is tried again after a short, growing pause until the deadline passes. */
static vl_status connect_socket(vl_client *c, const struct sockaddr_un *sa, const char *path,
                                int timeout_ms, vl_error *err) {
  int64_t deadline = deadline_after(timeout_ms);
  int pause_ms = 1;
  for (;;) {
    if (connect(c->fd, (const struct sockaddr *)sa, sizeof *sa) == 0 || errno == EISCONN) {
      return VL_OK;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN) {
      if (!backoff(deadline, pause_ms)) {
        return vl_error_set(err, VL_ERR_TIMEOUT, "",
                            "timed out connecting to %s: its listen backlog stayed full", path);
      }
      pause_ms = pause_ms < 50 ? pause_ms * 2 : 50;
      continue;
    }
    if (errno != EINPROGRESS) {
      return vl_error_set(err, VL_ERR_IO, "", "cannot connect to %s: %s", path, strerror(errno));
    }
    vl_status s = wait_ready(c, POLLOUT, deadline, err);
    if (s != VL_OK) {
      return s;
    }
    int so = 0;
    socklen_t len = sizeof so;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &so, &len) == 0 && so == 0) {
      return VL_OK;
    }
  }
}

vl_status vl_client_connect(const char *socket_path, int timeout_ms, vl_client **out,
                            vl_error *err) {
  char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 64];
  vl_status s = VL_OK;
  if (socket_path == NULL) {
    s = vl_client_default_socket(path, sizeof path, err);
    socket_path = path;
  }
  vl_client *c = calloc(1, sizeof *c);
  if (c == NULL) {
    return vl_error_set(err, VL_ERR_NOMEM, "", "cannot allocate a client");
  }
  c->fd = -1;
  c->timeout_ms = timeout_ms;
  c->max_frame_bytes = VL_CLIENT_DEFAULT_MAX_FRAME_BYTES;
  c->next_id = 1;
  c->rbuf = malloc(RECV_BUF_SIZE);
  if (c->rbuf == NULL) {
    free(c);
    return vl_error_set(err, VL_ERR_NOMEM, "", "cannot allocate a client");
  }
  struct sockaddr_un sa;
  if (s == VL_OK) {
    s = open_socket(socket_path, &sa, &c->fd, err);
  }
  if (s == VL_OK) {
    s = connect_socket(c, &sa, socket_path, timeout_ms, err);
  }
  if (s != VL_OK) {
    vl_client_close(c);
    return s;
  }
  *out = c;
  return VL_OK;
}

void vl_client_close(vl_client *c) {
  if (c == NULL) {
    return;
  }
  if (c->fd >= 0 && c->wlen > 0 && !c->broken) {
    /* requests queued while corked: sent within the client's timeout (a second without one,
     * so that closing never hangs on a daemon that stopped reading) */
    vl_error ignored;
    flush_sends(c, deadline_after(c->timeout_ms > 0 ? c->timeout_ms : 1000), &ignored);
  }
  if (c->fd >= 0) {
    close(c->fd);
  }
  free(c->rbuf);
  free(c->wbuf);
  free(c);
}

void vl_client_set_timeout(vl_client *c, int timeout_ms) {
  c->timeout_ms = timeout_ms;
}

void vl_client_set_max_frame_bytes(vl_client *c, uint64_t max_frame_bytes) {
  c->max_frame_bytes = max_frame_bytes;
}

bool vl_client_is_transport_error(vl_status s) {
  return vl__rpc_is_transport_status(s);
}

/* ---- requests ----------------------------------------------------------------------------- */

static vl_status check_usable(const vl_client *c, vl_error *err) {
  if (c->broken) {
    return vl_error_set(err, VL_ERR_IO, "", "the connection is unusable after an earlier error");
  }
  return VL_OK;
}

/* Sends the frame iov[0..n), or queues it in wbuf while corked: the queue goes out first when
 * the frame does not fit beside it, and a frame larger than the whole buffer is sent as is. */
static vl_status send_or_queue(vl_client *c, struct iovec *iov, int n, int64_t deadline,
                               vl_error *err) {
  size_t len = 0;
  for (int i = 0; i < n; i++) {
    len += iov[i].iov_len;
  }
  if (c->corked && len > SEND_BUF_SIZE - c->wlen) {
    vl_status s = flush_sends(c, deadline, err);
    if (s != VL_OK) {
      return s;
    }
  }
  if (!c->corked || len > SEND_BUF_SIZE) {
    return send_all(c, iov, n, deadline, err);
  }
  for (int i = 0; i < n; i++) {
    memcpy(c->wbuf + c->wlen, iov[i].iov_base, iov[i].iov_len);
    c->wlen += iov[i].iov_len;
  }
  return VL_OK;
}

/* params as text (params_text, when not NULL) or as a tree. */
static vl_status send_request_as(vl_client *c, uint64_t id, const char *method, const cJSON *params,
                                 const char *params_text, size_t params_len, const uint8_t *payload,
                                 size_t payload_len, int64_t deadline, vl_error *err) {
  if (id > VL_CLIENT_MAX_ID || method == NULL) {
    return vl_error_set(err, VL_ERR_INVALID_PARAMS, "",
                        id > VL_CLIENT_MAX_ID ? "request id over 2^53" : "no method given");
  }
  size_t json_len = 0;
  char *text = params_text != NULL
                   ? vl__rpc_request_text_raw(id, method, params_text, params_len, &json_len)
                   : vl__rpc_request_text(id, method, params, &json_len);
  if (text == NULL) {
    return vl_error_set(err, VL_ERR_NOMEM, "", "cannot print the request");
  }
  vl_frame_header h = {.json_len = (uint32_t)json_len, .payload_len = payload_len};
  vl_status s = VL_OK;
  if (json_len > UINT32_MAX) {
    s = vl_error_set(err, VL_ERR_TOO_LARGE, "", "request JSON of %zu bytes is over 4 GiB",
                     json_len);
  }
  if (s == VL_OK) {
    uint8_t hdr[VL_FRAME_HEADER_SIZE];
    vl_frame_header_encode(hdr, h.json_len, h.payload_len);
    struct iovec iov[3] = {{hdr, sizeof hdr}, {text, json_len}, {(void *)payload, payload_len}};
    s = send_or_queue(c, iov, payload_len > 0 ? 3 : 2, deadline, err);
  }
  free(text);
  return s;
}

static vl_status send_request(vl_client *c, uint64_t id, const char *method, const cJSON *params,
                              const uint8_t *payload, size_t payload_len, int64_t deadline,
                              vl_error *err) {
  return send_request_as(c, id, method, params, NULL, 0, payload, payload_len, deadline, err);
}

vl_status vl_client_send(vl_client *c, uint64_t id, const char *method, const cJSON *params,
                         const uint8_t *payload, size_t payload_len, vl_error *err) {
  vl_status s = check_usable(c, err);
  if (s == VL_OK) {
    s = send_request(c, id, method, params, payload, payload_len, deadline_after(c->timeout_ms),
                     err);
  }
  if (s == VL_OK) {
    c->pending++;
  }
  return s;
}

vl_status vl_client_send_text(vl_client *c, uint64_t id, const char *method, const char *params,
                              size_t params_len, const uint8_t *payload, size_t payload_len,
                              vl_error *err) {
  vl_status s = check_usable(c, err);
  if (s == VL_OK && params == NULL) {
    s = vl_error_set(err, VL_ERR_INVALID_PARAMS, "", "no params text given");
  }
  if (s == VL_OK) {
    s = send_request_as(c, id, method, NULL, params, params_len, payload, payload_len,
                        deadline_after(c->timeout_ms), err);
  }
  if (s == VL_OK) {
    c->pending++;
  }
  return s;
}

vl_status vl_client_cork(vl_client *c, bool on, vl_error *err) {
  vl_status s = check_usable(c, err);
  if (s != VL_OK) {
    return s;
  }
  if (on && c->wbuf == NULL) {
    c->wbuf = malloc(SEND_BUF_SIZE);
    if (c->wbuf == NULL) {
      return vl_error_set(err, VL_ERR_NOMEM, "", "cannot allocate the send buffer");
    }
  }
  c->corked = on;
  return on ? VL_OK : flush_sends(c, deadline_after(c->timeout_ms), err);
}

/* ---- responses ---------------------------------------------------------------------------- */

static vl_status protocol_error(vl_client *c, vl_error *err, const char *what) {
  return transport_fail(c, err, VL_ERR_PROTOCOL, "malformed response from the daemon: ", what);
}

static vl_status recv_header(vl_client *c, vl_frame_header *h, int64_t deadline, vl_error *err) {
  uint8_t hdr[VL_FRAME_HEADER_SIZE];
  vl_status s = recv_exact(c, hdr, sizeof hdr, deadline, err);
  if (s == VL_OK && vl_frame_header_decode(hdr, h, err) != VL_OK) {
    return protocol_error(c, err, "bad frame magic");
  }
  if (s == VL_OK && vl_frame_check_size(h, c->max_frame_bytes, err) != VL_OK) {
    return protocol_error(c, err, "response frame over the client's limit");
  }
  return s;
}

/* Reads one whole response frame and parses its JSON; with text set, a result response is
 * checked without a tree and its result's text handed over in *text (NUL-terminated, *text_len
 * its length; an error response is read as always and leaves *text NULL). */
static vl_status recv_response_as(vl_client *c, uint64_t *id, cJSON **result, char **text,
                                  size_t *text_len, vl_buf *out_payload, int64_t deadline,
                                  vl_error *err) {
  vl_frame_header h;
  vl_status s = recv_header(c, &h, deadline, err);
  if (s != VL_OK) {
    return s;
  }
  char *json = malloc((size_t)h.json_len + 1);
  if (json == NULL) {
    return transport_fail(c, err, VL_ERR_NOMEM, "cannot allocate the response", "");
  }
  s = recv_exact(c, json, h.json_len, deadline, err);
  if (s == VL_OK) {
    s = recv_payload(c, out_payload, (size_t)h.payload_len, deadline, err);
  }
  bool id_null = false;
  size_t off = 0, n = 0;
  if (s == VL_OK && text != NULL &&
      vl__rpc_response_scan(json, h.json_len, &id_null, id, &off, &n)) {
    if (id_null) *id = VL_CLIENT_NO_ID;
    memmove(json, json + off, n); /* the text becomes the result's, no copy */
    json[n] = '\0';
    *text = json;
    *text_len = n;
    return VL_OK;
  }
  if (s == VL_OK) {
    /* the envelope's strict reader; numbers keep their exact text (a lowered graph's literals) */
    vl__rpc_response resp;
    s = vl__rpc_response_parse(json, h.json_len, &resp, err);
    if (s == VL_ERR_PROTOCOL || s == VL_ERR_NOMEM) {
      c->broken = true;
    } else {
      *id = resp.id_null ? VL_CLIENT_NO_ID : resp.id;
      s = resp.error;
      if (s == VL_OK && result != NULL) {
        *result = cJSON_DetachItemViaPointer(resp.doc, resp.result);
      }
    }
    vl__rpc_response_free(&resp);
  }
  free(json);
  return s;
}

static vl_status recv_response(vl_client *c, uint64_t *id, cJSON **result, vl_buf *out_payload,
                               int64_t deadline, vl_error *err) {
  return recv_response_as(c, id, result, NULL, NULL, out_payload, deadline, err);
}

vl_status vl_client_recv_text(vl_client *c, uint64_t *id, char **result, size_t *result_len,
                              vl_buf *out_payload, vl_error *err) {
  *id = VL_CLIENT_NO_ID;
  *result = NULL;
  *result_len = 0;
  vl_status s = check_usable(c, err);
  if (s != VL_OK) {
    return s;
  }
  s = recv_response_as(c, id, NULL, result, result_len, out_payload, deadline_after(c->timeout_ms),
                       err);
  if (!c->broken && c->pending > 0) {
    c->pending--;
  }
  return s;
}

vl_status vl_client_recv(vl_client *c, uint64_t *id, cJSON **result, vl_buf *out_payload,
                         vl_error *err) {
  *id = VL_CLIENT_NO_ID;
  if (result != NULL) {
    *result = NULL;
  }
  vl_status s = check_usable(c, err);
  if (s != VL_OK) {
    return s;
  }
  s = recv_response(c, id, result, out_payload, deadline_after(c->timeout_ms), err);
  if (!c->broken && c->pending > 0) {
    c->pending--;
  }
  return s;
}

/* The daemon closed the connection while a request was being sent: it may have said why
 * first (a frame over its limit, a refused peer). Report that error if it did. */
static vl_status salvage_error(vl_client *c, int64_t deadline, vl_error *err) {
  vl_error why;
  uint64_t id;
  c->broken = false;
  vl_status s = recv_response(c, &id, NULL, NULL, deadline, &why);
  c->broken = true;
  if (s == VL_OK || vl_client_is_transport_error(s)) {
    return VL_ERR_IO; /* err still describes the failed send */
  }
  if (err != NULL) {
    *err = why;
  }
  return s;
}

/* vl_client_call, its result as a tree (result) or as its text (text, text_len). */
static vl_status call_as(vl_client *c, const char *method, const cJSON *params,
                         const uint8_t *payload, size_t payload_len, cJSON **result, char **text,
                         size_t *text_len, vl_buf *out_payload, vl_error *err) {
  vl_status s = check_usable(c, err);
  if (s == VL_OK && c->pending > 0) {
    s = vl_error_set(err, VL_ERR_INTERNAL, "",
                     "vl_client_call while %zu pipelined requests are outstanding", c->pending);
  }
  if (s != VL_OK) {
    return s;
  }
  int64_t deadline = deadline_after(c->timeout_ms);
  uint64_t id = c->next_id;
  c->next_id = id >= VL_CLIENT_MAX_ID ? 1 : id + 1;
  s = send_request(c, id, method, params, payload, payload_len, deadline, err);
  if (s == VL_ERR_IO) {
    return salvage_error(c, deadline, err);
  }
  uint64_t got = VL_CLIENT_NO_ID;
  if (s == VL_OK) {
    s = recv_response_as(c, &got, result, text, text_len, out_payload, deadline, err);
  }
  if (!c->broken && got != id && (s == VL_OK || got != VL_CLIENT_NO_ID)) {
    if (result != NULL) {
      cJSON_Delete(*result);
      *result = NULL;
    }
    if (text != NULL) {
      free(*text);
      *text = NULL;
      *text_len = 0;
    }
    return protocol_error(c, err, "response id does not match the request");
  }
  return s;
}

vl_status vl_client_call(vl_client *c, const char *method, const cJSON *params,
                         const uint8_t *payload, size_t payload_len, cJSON **result,
                         vl_buf *out_payload, vl_error *err) {
  if (result != NULL) {
    *result = NULL;
  }
  return call_as(c, method, params, payload, payload_len, result, NULL, NULL, out_payload, err);
}

vl_status vl_client_call_text(vl_client *c, const char *method, const cJSON *params,
                              const uint8_t *payload, size_t payload_len, char **result,
                              size_t *result_len, vl_buf *out_payload, vl_error *err) {
  *result = NULL;
  *result_len = 0;
  return call_as(c, method, params, payload, payload_len, NULL, result, result_len, out_payload,
                 err);
}
