/* it_client.c - the client library's receive path: response frames reach vl_client_recv* however
 * the stream cuts them (several frames in one write, a frame split at every byte, chunks on both
 * sides of the client's receive buffer) and come out bit-exact; bytes already buffered are
 * served before any wait for input; end of stream mid-frame and a frame over the limit are
 * transport errors. The peer is a plain socket in a thread of the test writing frames made with
 * the frame codec; the last tests pipeline blob payloads around the buffer's size and corked
 * lowerings through a real viewlowerd. Corking (vl_client_cork) is watched from the peer's end
 * of the socket: what a send leaves queued in the client, and when it arrives. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/sockios.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "viewlower/frame.h"

/* The client's receive buffer is 64 KiB (client.c, RECV_BUF_SIZE): payloads around it. */
enum { BUF = 65536, BIG = 3 * BUF + 5, SMALL_PAYLOAD = 300, N_MAX = 8 };

/* One response as written and as it must come back. */
typedef struct response {
  uint64_t id;       /* VL_CLIENT_NO_ID: "id":null */
  vl_status status;  /* VL_OK or the error's status */
  const char *text;  /* the result's JSON text, or the error's message */
  size_t payload_len; /* bytes of pattern(id) */
} response;

static uint8_t pattern_byte(uint64_t id, size_t i) {
  return (uint8_t)(((i * 2654435761u) >> 13) ^ id);
}

static void frame_append(vl_buf *b, const response *r) {
  char json[512];
  char id[24];
  if (r->id == VL_CLIENT_NO_ID) {
    snprintf(id, sizeof id, "null");
  } else {
    snprintf(id, sizeof id, "%llu", (unsigned long long)r->id);
  }
  if (r->status == VL_OK) {
    snprintf(json, sizeof json, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}", id, r->text);
  } else {
    snprintf(json, sizeof json,
             "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":%d,\"message\":\"%s\","
             "\"data\":{\"kind\":\"%s\"}}}",
             id, vl_status_rpc_code(r->status), r->text, vl_status_kind(r->status));
  }
  uint8_t h[VL_FRAME_HEADER_SIZE];
  vl_frame_header_encode(h, (uint32_t)strlen(json), r->payload_len);
  assert_int_equal(vl_buf_append(b, h, sizeof h), VL_OK);
  assert_int_equal(vl_buf_append(b, json, strlen(json)), VL_OK);
  uint8_t *p = vl_buf_extend(b, r->payload_len);
  assert_true(p != NULL || r->payload_len == 0);
  for (size_t i = 0; i < r->payload_len; i++) {
    p[i] = pattern_byte(r->id, i);
  }
}

/* Receives one response with vl_client_recv_text and checks every byte of it; its payload is
 * dropped unless keep is set. */
static void expect_response(vl_client *c, const response *want, bool keep) {
  uint64_t id = 0;
  char *text = NULL;
  size_t len = 0;
  vl_buf payload = {0};
  vl_error err;
  vl_status s = vl_client_recv_text(c, &id, &text, &len, keep ? &payload : NULL, &err);
  if (s != want->status) {
    fail_msg("response %llu: status %d (%s), wanted %d", (unsigned long long)want->id, (int)s,
             err.message, (int)want->status);
  }
  assert_true(id == want->id);
  if (s == VL_OK) {
    assert_int_equal(len, strlen(want->text));
    assert_string_equal(text, want->text);
  } else {
    assert_null(text);
    assert_string_equal(err.message, want->text);
  }
  assert_int_equal(payload.len, keep ? want->payload_len : 0);
  for (size_t i = 0; i < payload.len; i++) {
    if (payload.data[i] != pattern_byte(want->id, i)) {
      fail_msg("response %llu: payload byte %zu differs", (unsigned long long)want->id, i);
    }
  }
  free(text);
  vl_buf_free(&payload);
}

/* ---- the peer: writes a byte string in chunks, each once the client has read the last ------ */

typedef struct peer {
  daemon_proc d; /* only its directory and socket path */
  int listener;
  pthread_t thread;
  vl_buf bytes;        /* what it writes: the frames, back to back */
  size_t ends[N_MAX];  /* where each frame ends in bytes */
  size_t chunk;        /* bytes per write */
  bool end_stream;     /* shut its side down once written (the client reads end of stream) */
  int error;           /* errno of a failed accept or write (asserts belong to the main thread) */
} peer;

/* Waits (up to a second) until the client has read every byte written (SIOCOUTQ of a Unix
 * stream socket: bytes not yet consumed by the reader), so that each write reaches the client
 * as a recv of its own. Pacing only: past the second the next write goes anyway. */
static void wait_read(int fd) {
  uint64_t until = now_ms() + 1000;
  int queued = 0;
  while (ioctl(fd, SIOCOUTQ, &queued) == 0 && queued > 0 && now_ms() < until) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 20000};
    nanosleep(&ts, NULL);
  }
}

static void *peer_run(void *arg) {
  peer *p = arg;
  int fd = accept(p->listener, NULL, NULL);
  if (fd < 0) {
    p->error = errno;
    return NULL;
  }
  for (size_t at = 0; at < p->bytes.len && p->error == 0;) {
    size_t n = p->bytes.len - at < p->chunk ? p->bytes.len - at : p->chunk;
    ssize_t w = send(fd, p->bytes.data + at, n, MSG_NOSIGNAL);
    if (w < 0 && errno != EINTR) {
      p->error = errno;
    }
    at += w > 0 ? (size_t)w : 0;
    wait_read(fd);
  }
  if (p->end_stream) {
    shutdown(fd, SHUT_WR);
  }
  /* The client's requests until it closes: closing with them unread would reset the stream. */
  char drain[256];
  while (recv(fd, drain, sizeof drain, 0) > 0) {
  }
  close(fd);
  return NULL;
}

/* The frames of rs[0..n) to be written in chunks of chunk bytes, on a fresh socket path. */
static void peer_init(peer *p, const response *rs, size_t n, size_t chunk, bool end_stream) {
  memset(p, 0, sizeof *p);
  assert_true(n <= N_MAX);
  daemon_prepare(&p->d);
  for (size_t i = 0; i < n; i++) {
    frame_append(&p->bytes, &rs[i]);
    p->ends[i] = p->bytes.len;
  }
  p->chunk = chunk;
  p->end_stream = end_stream;
}

/* Starts the peer and returns a client connected to it. */
static vl_client *peer_connect(peer *p) {
  p->listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(p->listener >= 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", p->d.sock);
  assert_int_equal(bind(p->listener, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(p->listener, 1), 0);
  assert_int_equal(pthread_create(&p->thread, NULL, peer_run, p), 0);
  vl_client *c = NULL;
  vl_error err;
  if (vl_client_connect(p->d.sock, daemon_wait_ms(), &c, &err) != VL_OK) {
    fail_msg("connect: %s", err.message);
  }
  return c;
}

static vl_client *peer_start(peer *p, const response *rs, size_t n, size_t chunk) {
  peer_init(p, rs, n, chunk, false);
  return peer_connect(p);
}

/* Closes the client (the peer then ends), joins the peer and removes its socket. */
static void peer_finish(peer *p, vl_client *c) {
  vl_client_close(c);
  assert_int_equal(pthread_join(p->thread, NULL), 0);
  close(p->listener);
  vl_buf_free(&p->bytes);
  daemon_cleanup(&p->d);
  assert_int_equal(p->error, 0);
}

/* ---- responses cut anywhere --------------------------------------------------------------- */

static const response small[] = {
    {1, VL_OK, "{\"pong\":true}", 0},
    {7, VL_OK, "{\"output\":{\"dtype\":\"uint8\",\"blob\":{\"offset\":0,\"nbytes\":300}}}",
     SMALL_PAYLOAD},
    {3, VL_ERR_UNKNOWN_METHOD, "unknown method", 0},
    {VL_CLIENT_NO_ID, VL_ERR_PARSE, "malformed JSON", 0},
    {(uint64_t)1 << 53, VL_OK, "{\"x\":1.5e300,\"s\":\"\\u00e9\"}", 0},
    {8, VL_OK, "{}", 1},
};

static const response large[] = {
    {1, VL_OK, "{\"pong\":true}", 0},
    {2, VL_OK, "{\"n\":196613}", BIG},
    {3, VL_OK, "{\"n\":65536}", BUF},
    {4, VL_OK, "{\"n\":65535}", BUF - 1},
    {5, VL_ERR_INVALID_GRAPH, "a graph with a cycle", 0},
    {6, VL_OK, "{\"n\":65537}", BUF + 1},
    {9, VL_OK, "{\"n\":300}", SMALL_PAYLOAD},
};

/* Receives rs[0..n), the first by a call (id 1: its request goes to the peer, which ignores it),
 * keeping the payloads or dropping them, then checks that the stream is at its end: one more
 * receive times out, within its deadline. */
static void expect_all(vl_client *c, const response *rs, size_t n, bool keep) {
  vl_error err;
  assert_int_equal(vl_client_ping(c, &err), VL_OK);
  for (size_t i = 1; i < n; i++) {
    expect_response(c, &rs[i], keep);
  }
  vl_client_set_timeout(c, 200);
  uint64_t id;
  uint64_t t0 = now_ms();
  assert_int_equal(vl_client_recv(c, &id, NULL, NULL, &err), VL_ERR_TIMEOUT);
  assert_true(now_ms() - t0 >= 200);
}

static void frames_in_one_write_come_out_bit_exact(void **state) {
  (void)state;
  peer p;
  vl_client *c = peer_start(&p, large, sizeof large / sizeof *large, SIZE_MAX);
  expect_all(c, large, sizeof large / sizeof *large, true);
  peer_finish(&p, c);
}

static void dropped_payloads_leave_the_next_frame_intact(void **state) {
  (void)state;
  static const size_t chunks[] = {SIZE_MAX, 4093};
  for (size_t k = 0; k < sizeof chunks / sizeof *chunks; k++) {
    peer p;
    vl_client *c = peer_start(&p, large, sizeof large / sizeof *large, chunks[k]);
    expect_all(c, large, sizeof large / sizeof *large, false);
    peer_finish(&p, c);
  }
}

static void frames_split_at_every_byte_come_out_bit_exact(void **state) {
  (void)state;
  peer p;
  vl_client *c = peer_start(&p, small, sizeof small / sizeof *small, 1);
  expect_all(c, small, sizeof small / sizeof *small, true);
  peer_finish(&p, c);
}

/* Chunks that end at every offset of the buffer sooner or later, and ones longer than it. */
static void frames_in_odd_chunks_come_out_bit_exact(void **state) {
  (void)state;
  static const size_t chunks[] = {997, 4093, BUF - 1, BUF + 3};
  for (size_t k = 0; k < sizeof chunks / sizeof *chunks; k++) {
    peer p;
    vl_client *c = peer_start(&p, large, sizeof large / sizeof *large, chunks[k]);
    expect_all(c, large, sizeof large / sizeof *large, true);
    peer_finish(&p, c);
  }
}

/* The end of the stream in the middle of the frame after a whole one, both in one write: the
 * whole one is served from the buffer, then the cut one is a transport error. */
static void a_frame_cut_by_the_end_of_stream_is_an_io_error_after_the_whole_ones(void **state) {
  (void)state;
  peer p;
  peer_init(&p, large, 2, SIZE_MAX, true);
  p.bytes.len -= BIG / 2;
  vl_client *c = peer_connect(&p);
  vl_error err;
  assert_int_equal(vl_client_ping(c, &err), VL_OK);
  uint64_t id;
  vl_buf payload = {0};
  assert_int_equal(vl_client_recv(c, &id, NULL, &payload, &err), VL_ERR_IO);
  assert_string_equal(err.message, "the daemon closed the connection");
  assert_int_equal(payload.len, 0);
  assert_int_equal(vl_client_recv(c, &id, NULL, &payload, &err), VL_ERR_IO);
  assert_string_equal(err.message, "the connection is unusable after an earlier error");
  vl_buf_free(&payload);
  peer_finish(&p, c);
}

/* A buffered header whose frame is over the client's limit: refused from the header alone,
 * before anything is allocated for it (a terabyte would be VL_ERR_NOMEM). */
static void a_buffered_frame_over_the_limit_is_refused_from_its_header(void **state) {
  (void)state;
  static const response rs[] = {
      {1, VL_OK, "{\"pong\":true}", 0},
      {2, VL_OK, "{}", 0},
  };
  peer p;
  peer_init(&p, rs, 2, SIZE_MAX, false);
  /* the second frame's header now claims a payload of 1 TiB */
  vl_frame_header_encode(p.bytes.data + p.ends[0],
                         (uint32_t)(p.ends[1] - p.ends[0] - VL_FRAME_HEADER_SIZE),
                         (uint64_t)1 << 40);
  vl_client *c = peer_connect(&p);
  vl_error err;
  assert_int_equal(vl_client_ping(c, &err), VL_OK);
  uint64_t id;
  assert_int_equal(vl_client_recv(c, &id, NULL, NULL, &err), VL_ERR_PROTOCOL);
  assert_string_equal(err.message,
                      "malformed response from the daemon: response frame over the client's limit");
  peer_finish(&p, c);
}

/* ---- corking ------------------------------------------------------------------------------- */

/* The frame of {"jsonrpc":"2.0","id":id,"method":"ping","params":params}. */
static void request_frame(vl_buf *b, uint64_t id, const char *params) {
  char json[128 * 1024];
  int n = snprintf(json, sizeof json, "{\"jsonrpc\":\"2.0\",\"id\":%llu,\"method\":\"ping\",\"params\":%s}",
                   (unsigned long long)id, params);
  assert_true(n > 0 && (size_t)n < sizeof json);
  uint8_t h[VL_FRAME_HEADER_SIZE];
  vl_frame_header_encode(h, (uint32_t)n, 0);
  assert_int_equal(vl_buf_append(b, h, sizeof h), VL_OK);
  assert_int_equal(vl_buf_append(b, json, (size_t)n), VL_OK);
}

/* Bytes the client has sent that the peer's end holds unread. A Unix stream send is complete
 * when it returns: the bytes are already queued at the peer. */
static size_t unread_at(int fd) {
  int n = -1;
  assert_int_equal(ioctl(fd, FIONREAD, &n), 0);
  return (size_t)n;
}

/* Reads what the peer's end holds and checks that it is exactly want's bytes. */
static void expect_received(int fd, const vl_buf *want) {
  assert_int_equal(unread_at(fd), want->len);
  uint8_t *got = malloc(want->len + 1);
  assert_non_null(got);
  size_t at = 0;
  while (at < want->len) {
    ssize_t r = recv(fd, got + at, want->len - at, 0);
    assert_true(r > 0);
    at += (size_t)r;
  }
  assert_memory_equal(got, want->data, want->len);
  free(got);
}

static void send_ping(vl_client *c, uint64_t id, const char *params) {
  vl_error err;
  if (vl_client_send_text(c, id, "ping", params, strlen(params), NULL, 0, &err) != VL_OK) {
    fail_msg("send %llu: %s", (unsigned long long)id, err.message);
  }
}

/* Corked requests stay in the client until it is uncorked, is about to read from the socket, its
 * 64 KiB queue would overflow, or it closes; they then arrive in order, byte for byte the frames
 * an uncorked client sends. Single-threaded: the test holds the peer's end of the socket. */
static void corked_requests_go_out_when_the_client_waits_uncorks_fills_or_closes(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(listener >= 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", d.sock);
  assert_int_equal(bind(listener, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(listener, 1), 0);
  vl_client *c = NULL;
  vl_error err;
  assert_int_equal(vl_client_connect(d.sock, daemon_wait_ms(), &c, &err), VL_OK);
  int fd = accept(listener, NULL, NULL); /* the connection was made in the backlog */
  assert_true(fd >= 0);
  vl_buf want = {0};

  /* uncorked (the default): each request is on its way when the send returns */
  send_ping(c, 1, "{}");
  request_frame(&want, 1, "{}");
  expect_received(fd, &want);

  /* corked: nothing until uncorked, then the three in one go */
  assert_int_equal(vl_client_cork(c, true, &err), VL_OK);
  want.len = 0;
  for (uint64_t id = 2; id <= 4; id++) {
    send_ping(c, id, "{}");
    request_frame(&want, id, "{}");
  }
  assert_int_equal(unread_at(fd), 0);
  assert_int_equal(vl_client_cork(c, false, &err), VL_OK);
  expect_received(fd, &want);

  /* corked again: a receive sends the queued request before it reads (here the answer is
   * already waiting, so the receive does not have to wait; a client that waited for the answer
   * to a request it still held would wait forever) */
  assert_int_equal(vl_client_cork(c, true, &err), VL_OK);
  send_ping(c, 5, "{}");
  assert_int_equal(unread_at(fd), 0);
  vl_buf answer = {0};
  frame_append(&answer, &(response){5, VL_OK, "{\"pong\":true}", 0});
  assert_int_equal(send(fd, answer.data, answer.len, MSG_NOSIGNAL), (ssize_t)answer.len);
  want.len = 0;
  request_frame(&want, 5, "{}");
  expect_response(c, &(response){5, VL_OK, "{\"pong\":true}", 0}, false);
  expect_received(fd, &want);

  /* a request that does not fit beside the queue sends the queue first; one larger than the
   * whole queue goes out at once, after it */
  char *params = malloc(BUF + 64);
  assert_non_null(params);
  size_t fill = BUF / 2;
  memset(params, ' ', fill);
  memcpy(params, "{\"a\":\"", 6);
  memcpy(params + fill - 2, "\"}", 3);
  send_ping(c, 6, params); /* over half the queue */
  assert_int_equal(unread_at(fd), 0);
  send_ping(c, 7, params); /* would overflow it: 6 goes first, 7 waits */
  want.len = 0;
  request_frame(&want, 6, params);
  expect_received(fd, &want);
  send_ping(c, 8, "{}");
  fill = BUF + 32; /* a frame larger than the queue */
  memset(params, ' ', fill);
  memcpy(params, "{\"a\":\"", 6);
  memcpy(params + fill - 2, "\"}", 3);
  send_ping(c, 9, params);
  want.len = 0;
  char *first = malloc(BUF);
  assert_non_null(first);
  memset(first, ' ', BUF / 2);
  memcpy(first, "{\"a\":\"", 6);
  memcpy(first + BUF / 2 - 2, "\"}", 3);
  request_frame(&want, 7, first);
  request_frame(&want, 8, "{}");
  request_frame(&want, 9, params);
  expect_received(fd, &want);

  /* closing sends what is queued, then ends the stream */
  send_ping(c, 10, "{}");
  assert_int_equal(unread_at(fd), 0);
  vl_client_close(c);
  want.len = 0;
  request_frame(&want, 10, "{}");
  expect_received(fd, &want);
  char byte;
  assert_int_equal(recv(fd, &byte, 1, 0), 0);

  free(first);
  free(params);
  vl_buf_free(&answer);
  vl_buf_free(&want);
  close(fd);
  close(listener);
  daemon_cleanup(&d);
}

/* ---- a real daemon -------------------------------------------------------------------------- */

/* view_copy requests of uint8 blobs on both sides of the buffer's size, all sent before any is
 * received: the daemon answers them in batched writes. */
static void pipelined_blobs_around_the_buffer_size_come_back_bit_exact(void **state) {
  (void)state;
  static const size_t sizes[N_MAX] = {1, BUF - 1, BUF, BUF + 1, 16, BIG, 2 * BUF, 4096};
  daemon_proc *d = daemon_new(NULL);
  vl_client *c = client_open(d);
  uint8_t *in = malloc(BIG);
  assert_non_null(in);
  for (uint64_t i = 0; i < N_MAX; i++) {
    for (size_t j = 0; j < sizes[i]; j++) {
      in[j] = pattern_byte(i, j);
    }
    char text[256];
    snprintf(text, sizeof text,
             "{\"input\":{\"dtype\":\"uint8\",\"shape\":[%zu],\"blob\":{\"offset\":0,"
             "\"nbytes\":%zu}},\"size\":[-1],\"encoding\":\"blob\"}",
             sizes[i], sizes[i]);
    vl_error err;
    assert_int_equal(
        vl_client_send_text(c, i + 1, "view_copy", text, strlen(text), in, sizes[i], &err), VL_OK);
  }
  bool seen[N_MAX] = {false};
  for (size_t k = 0; k < N_MAX; k++) {
    uint64_t id = 0;
    cJSON *r = NULL;
    vl_buf out = {0};
    vl_error err;
    vl_status s = vl_client_recv(c, &id, &r, &out, &err);
    if (s != VL_OK) {
      fail_msg("view_copy: %s %s", err.path, err.message);
    }
    assert_true(id >= 1 && id <= N_MAX && !seen[id - 1]);
    seen[id - 1] = true;
    assert_int_equal(out.len, sizes[id - 1]);
    for (size_t j = 0; j < out.len; j++) {
      if (out.data[j] != pattern_byte(id - 1, j)) {
        fail_msg("response %llu: payload byte %zu differs", (unsigned long long)id, j);
      }
    }
    cJSON_Delete(r);
    vl_buf_free(&out);
  }
  free(in);
  vl_client_close(c);
  daemon_delete(d);
}

/* The same sixteen small lowerings pipelined corked and uncorked through a real daemon: the
 * answers are the same bytes, whichever way the requests went out. */
static void corked_lowerings_get_the_answers_of_uncorked_ones(void **state) {
  (void)state;
  static const char graph_fmt[] =
      "{\"graph\":{\"format\":\"viewlower.graph\",\"version\":1,\"name\":\"g%d\",\"nodes\":["
      "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":[2,%d]}},"
      "{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"aten.view_copy.default\","
      "\"args\":[\"x\",[%d,2]],\"val\":{\"dtype\":\"float32\",\"shape\":[%d,2]}},"
      "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"y\"]}]}}";
  enum { N = 16 };
  daemon_proc *d = daemon_new(NULL);
  char *answers[2][N] = {{NULL}};
  for (int corked = 0; corked < 2; corked++) {
    vl_client *c = client_open(d);
    vl_error err;
    assert_int_equal(vl_client_cork(c, corked == 1, &err), VL_OK);
    for (int i = 0; i < N; i++) {
      char text[1024];
      snprintf(text, sizeof text, graph_fmt, i, i + 1, i + 1, i + 1);
      assert_int_equal(vl_client_send_text(c, (uint64_t)i + 1, "lower", text, strlen(text), NULL,
                                           0, &err),
                       VL_OK);
    }
    for (int k = 0; k < N; k++) {
      uint64_t id = 0;
      char *r = NULL;
      size_t len = 0;
      if (vl_client_recv_text(c, &id, &r, &len, NULL, &err) != VL_OK) {
        fail_msg("lower: %s %s", err.path, err.message);
      }
      assert_true(id >= 1 && id <= N && answers[corked][id - 1] == NULL);
      answers[corked][id - 1] = r;
    }
    vl_client_close(c);
  }
  for (int i = 0; i < N; i++) {
    assert_non_null(strstr(answers[0][i], "\"view_copy_nodes\":1,"));
    assert_string_equal(answers[1][i], answers[0][i]);
    free(answers[0][i]);
    free(answers[1][i]);
  }
  daemon_delete(d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(frames_in_one_write_come_out_bit_exact),
      cmocka_unit_test(dropped_payloads_leave_the_next_frame_intact),
      cmocka_unit_test(frames_split_at_every_byte_come_out_bit_exact),
      cmocka_unit_test(frames_in_odd_chunks_come_out_bit_exact),
      cmocka_unit_test(a_frame_cut_by_the_end_of_stream_is_an_io_error_after_the_whole_ones),
      cmocka_unit_test(a_buffered_frame_over_the_limit_is_refused_from_its_header),
      cmocka_unit_test(corked_requests_go_out_when_the_client_waits_uncorks_fills_or_closes),
      cmocka_unit_test(pipelined_blobs_around_the_buffer_size_come_back_bit_exact),
      cmocka_unit_test(corked_lowerings_get_the_answers_of_uncorked_ones),
  };
  return harness_result(cmocka_run_group_tests(tests, NULL, NULL));
}
