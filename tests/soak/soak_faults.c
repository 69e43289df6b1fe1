/* soak_faults.c - fault tests against a real viewlowerd: clients that disconnect mid-frame,
 * mid-response or with requests in flight (the daemon keeps serving, and its connection count
 * and open fds come back to their baseline); SIGTERM with requests received but not yet
 * answered (each is answered, then exit 0); SIGTERM under load from many pipelining clients
 * (no response lost or mismatched, exit 0); restarts over a stale socket file (served at once);
 * running totals that must saturate rather than overflow.
 * Uses the integration tests' harness (tests/integration/harness.h) to run the daemon. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "viewlower/frame.h"

void ping_ok(const char *path); /* harness.c */

/* verify of a channels-last tensor (1 x 64 x side x side float32, flat = side * side) flattened as
 * if contiguous: milliseconds of work on a worker thread per MiB, so requests are still in flight
 * when a fault strikes. */
#define VERIFY_PARAMS(side, flat)                                                                  \
  "{\"graph\":{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":["                           \
  "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":"               \
  "[1,64," side "," side "]}},{\"name\":\"x_cl\",\"op\":\"call_function\",\"target\":"             \
  "\"dim_order_ops._to_dim_order_copy.default\",\"args\":[\"x\"],\"kwargs\":{\"dim_order\":"       \
  "[0,2,3,1]},\"val\":{\"dtype\":\"float32\",\"shape\":[1,64," side "," side "],\"dim_order\":"    \
  "[0,2,3,1]}},{\"name\":\"flat\",\"op\":\"call_function\",\"target\":"                            \
  "\"aten.view_copy.default\",\"args\":[\"x_cl\",[1,64,-1]],\"val\":{\"dtype\":\"float32\","       \
  "\"shape\":[1,64," flat "]}},{\"name\":\"y\",\"op\":\"call_function\",\"target\":"               \
  "\"aten.relu.default\",\"args\":[\"flat\"],\"val\":{\"dtype\":\"float32\",\"shape\":"            \
  "[1,64," flat "]}},{\"name\":\"out\",\"op\":\"output\",\"args\":[\"y\"]}]},"                     \
  "\"seed\":1}"
#define HEAVY_PARAMS VERIFY_PARAMS("128", "16384") /* 4 MiB */
#define MEDIUM_PARAMS VERIFY_PARAMS("64", "4096")  /* 1 MiB */

/* ---------------------------------------------------------------- helpers */

static void pause_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static long fd_count(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
  long n = 0;
  DIR *d = opendir(path);
  if (d == NULL) return -1;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* The daemon's connections.current and requests.in_flight, through a fresh client. */
static void daemon_counts(const daemon_proc *d, double *connections, double *in_flight) {
  vl_client *c = client_open(d);
  cJSON *stats = NULL;
  vl_error err;
  if (vl_client_stats(c, &stats, &err) != VL_OK) fail_msg("stats: %s", err.message);
  *connections = json_number(stats, "connections.current");
  *in_flight = json_number(stats, "requests.in_flight");
  cJSON_Delete(stats);
  vl_client_close(c);
}

/* Waits until only our stats connection is open, nothing is in flight, and the daemon's fds
 * are back at baseline. */
static void expect_back_to_baseline(const daemon_proc *d, long fds_baseline) {
  uint64_t deadline = now_ms() + HARNESS_WAIT_MS;
  double conns = -1, in_flight = -1;
  long fds = -1;
  for (;;) {
    daemon_counts(d, &conns, &in_flight);
    fds = fd_count(d->pid);
    if (conns == 1 && in_flight == 0 && fds == fds_baseline) return;
    if (now_ms() > deadline) break;
    pause_ms(20);
  }
  daemon_dump_log(d);
  fail_msg("not back to baseline: %g connections, %g in flight, %ld fds (baseline %ld)", conns,
           in_flight, fds, fds_baseline);
}

static char *request_text(uint64_t id, const char *method, const char *params) {
  size_t n = strlen(params) + strlen(method) + 96;
  char *s = malloc(n);
  assert_non_null(s);
  snprintf(s, n, "{\"jsonrpc\":\"2.0\",\"id\":%llu,\"method\":\"%s\",\"params\":%s}",
           (unsigned long long)id, method, params);
  return s;
}

static void send_request(int fd, uint64_t id, const char *method, const char *params,
                         const void *payload, size_t payload_len) {
  char *text = request_text(id, method, params);
  raw_send_frame(fd, text, payload, payload_len);
  free(text);
}

/* One whole frame as bytes: header, JSON, payload. */
static uint8_t *frame_bytes(const char *json, const uint8_t *payload, size_t payload_len,
                            size_t *len) {
  size_t jl = strlen(json);
  *len = VL_FRAME_HEADER_SIZE + jl + payload_len;
  uint8_t *b = malloc(*len);
  assert_non_null(b);
  vl_frame_header_encode(b, (uint32_t)jl, payload_len);
  memcpy(b + VL_FRAME_HEADER_SIZE, json, jl);
  if (payload_len) memcpy(b + VL_FRAME_HEADER_SIZE + jl, payload, payload_len);
  return b;
}

/* ---------------------------------------------------------------- disconnects */

static void disconnects_mid_frame_leave_nothing_behind(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  daemon_start(&d, NULL);
  long baseline = fd_count(d.pid);
  uint8_t payload[48] = {0};
  char *json = request_text(1, "view_copy",
                            "{\"input\":{\"dtype\":\"float32\",\"shape\":[12],\"blob\":{"
                            "\"offset\":0,\"nbytes\":48}},\"size\":[3,4]}");
  size_t len;
  uint8_t *frame = frame_bytes(json, payload, sizeof payload, &len);
  size_t jl = strlen(json);
  const size_t cuts[] = {1, 4, 8, 15, 16, 17, 16 + jl / 2, 16 + jl, 16 + jl + 20, len - 1};
  for (int round = 0; round < 20; round++) {
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
      int fd = raw_connect(d.sock);
      raw_send(fd, frame, cuts[i]);
      if (round % 2) shutdown(fd, SHUT_WR);
      close(fd);
    }
  }
  ping_ok(d.sock);
  expect_back_to_baseline(&d, baseline);
  assert_int_equal(daemon_stop(&d), 0);
  free(frame);
  free(json);
  daemon_cleanup(&d);
}

static void disconnects_mid_response_leave_nothing_behind(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  daemon_start(&d, NULL);
  long baseline = fd_count(d.pid);
  /* A 4 MiB tensor copied back as a 4 MiB blob: far more than a socket buffer holds. */
  size_t n = (size_t)4 << 20;
  uint8_t *payload = calloc(1, n);
  assert_non_null(payload);
  for (int round = 0; round < 10; round++) {
    int fd = raw_connect(d.sock);
    send_request(fd, 1, "view_copy",
                 "{\"input\":{\"dtype\":\"float32\",\"shape\":[1048576],\"blob\":{\"offset\":0,"
                 "\"nbytes\":4194304}},\"size\":[1024,-1],\"out_dim_order\":[1,0],"
                 "\"encoding\":\"blob\"}",
                 payload, n);
    uint8_t head[100];
    ssize_t got = recv(fd, head, sizeof head, MSG_WAITALL);
    assert_true(got == (ssize_t)sizeof head);
    close(fd);
  }
  ping_ok(d.sock);
  expect_back_to_baseline(&d, baseline);
  assert_int_equal(daemon_stop(&d), 0);
  free(payload);
  daemon_cleanup(&d);
}

static void disconnects_with_requests_in_flight_leave_nothing_behind(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  daemon_start(&d, NULL);
  long baseline = fd_count(d.pid);
  for (int round = 0; round < 10; round++) {
    int fd = raw_connect(d.sock);
    for (uint64_t id = 1; id <= 4; id++) send_request(fd, id, "verify", MEDIUM_PARAMS, NULL, 0);
    send_request(fd, 5, "ping", "{}", NULL, 0);
    if (round % 2) {
      /* Wait until the daemon has read everything (the ping is answered in order of reading),
       * so the heavy requests are surely queued or running when the client goes. */
      cJSON *r = raw_recv_frame(fd, NULL);
      cJSON_Delete(r);
    }
    close(fd);
  }
  ping_ok(d.sock);
  expect_back_to_baseline(&d, baseline);
  assert_int_equal(daemon_stop(&d), 0);
  daemon_cleanup(&d);
}

/* ---------------------------------------------------------------- SIGTERM */

static void sigterm_answers_every_request_already_received(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  daemon_start(&d, NULL);
  int fd = raw_connect(d.sock);
  enum { HEAVY = 8, BARRIER = 100 };
  for (uint64_t id = 1; id <= HEAVY; id++) send_request(fd, id, "verify", HEAVY_PARAMS, NULL, 0);
  send_request(fd, BARRIER, "ping", "{}", NULL, 0);
  bool seen[HEAVY + 1] = {false}, barrier = false;
  int answered = 0;
  bool signalled = false;
  while (answered < HEAVY) {
    cJSON *r = raw_recv_frame(fd, NULL);
    double id = json_number(r, "id");
    if (id == BARRIER) {
      /* Every frame before the ping has been read: SIGTERM now. */
      barrier = true;
      assert_int_equal(kill(d.pid, SIGTERM), 0);
      signalled = true;
    } else {
      assert_true(id >= 1 && id <= HEAVY);
      assert_false(seen[(int)id]);
      seen[(int)id] = true;
      answered++;
      if (cJSON_GetObjectItemCaseSensitive(r, "result") == NULL) {
        char *text = cJSON_PrintUnformatted(r);
        fail_msg("request %g was answered with %s", id, text);
      }
      assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
          cJSON_GetObjectItemCaseSensitive(r, "result"), "equal")));
    }
    cJSON_Delete(r);
  }
  if (!barrier) {
    /* All heavy answers came before the barrier: it must still come, then SIGTERM. */
    cJSON *r = raw_recv_frame(fd, NULL);
    assert_true(json_number(r, "id") == BARRIER);
    cJSON_Delete(r);
    kill(d.pid, SIGTERM);
    signalled = true;
  }
  assert_true(signalled);
  raw_expect_closed(fd);
  close(fd);
  int rc = daemon_wait(d.pid, HARNESS_WAIT_MS);
  d.pid = -1;
  assert_int_equal(rc, 0);
  daemon_cleanup(&d);
}

typedef struct {
  const char *sock;
  uint64_t sent, answered, mismatched, bad_outcomes;
  vl_status end;
  char problem[256];
} load_client;

static const struct {
  const char *method;
  const char *params;
} mix[] = {
    {"verify", HEAVY_PARAMS},
    {"ping", "{}"},
    {"version", "{}"},
    {"view_copy", "{\"input\":{\"dtype\":\"int32\",\"shape\":[2,3],\"values\":[1,2,3,4,5,6]},"
                  "\"size\":[3,-1]}"},
    {"lower", "{}"}, /* invalid params */
};

/* Pipelines requests (4 in flight) until the daemon closes the connection. */
static void *load_client_main(void *arg) {
  load_client *lc = arg;
  vl_client *c = NULL;
  vl_error err;
  lc->end = vl_client_connect(lc->sock, HARNESS_WAIT_MS, &c, &err);
  uint64_t in_flight[4];
  size_t n = 0;
  while (lc->end == VL_OK) {
    while (n < 4 && lc->end == VL_OK) {
      uint64_t id = lc->sent + 1;
      size_t k = (size_t)(id % (sizeof mix / sizeof *mix));
      cJSON *params = cJSON_Parse(mix[k].params);
      lc->end = vl_client_send(c, id, mix[k].method, params, NULL, 0, &err);
      cJSON_Delete(params);
      if (lc->end == VL_OK) {
        in_flight[n++] = id;
        lc->sent++;
      }
    }
    uint64_t id;
    vl_status s = lc->end == VL_OK ? vl_client_recv(c, &id, NULL, NULL, &err) : lc->end;
    if (vl_client_is_transport_error(s)) {
      lc->end = s;
      break;
    }
    size_t i = 0;
    while (i < n && in_flight[i] != id) i++;
    if (i == n) {
      lc->mismatched++;
      continue;
    }
    in_flight[i] = in_flight[--n];
    lc->answered++;
    bool expect_error = strcmp(mix[id % (sizeof mix / sizeof *mix)].method, "lower") == 0;
    bool ok = expect_error ? s == VL_ERR_INVALID_PARAMS : (s == VL_OK || s == VL_ERR_SHUTTING_DOWN);
    if (!ok) {
      lc->bad_outcomes++;
      snprintf(lc->problem, sizeof lc->problem, "id %llu: %.200s", (unsigned long long)id,
               err.message);
    }
  }
  vl_client_close(c);
  return NULL;
}

static void sigterm_under_load_loses_nothing_and_exits_0(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  daemon_start(&d, (const char *const[]){"--log-level", "info", NULL});
  enum { CLIENTS = 24 };
  load_client lcs[CLIENTS];
  pthread_t tids[CLIENTS];
  memset(lcs, 0, sizeof lcs);
  for (int i = 0; i < CLIENTS; i++) {
    lcs[i].sock = d.sock;
    assert_int_equal(pthread_create(&tids[i], NULL, load_client_main, &lcs[i]), 0);
  }
  pause_ms(1500);
  assert_int_equal(kill(d.pid, SIGTERM), 0);
  for (int i = 0; i < CLIENTS; i++) pthread_join(tids[i], NULL);
  int rc = daemon_wait(d.pid, HARNESS_WAIT_MS);
  d.pid = -1;
  uint64_t answered = 0;
  for (int i = 0; i < CLIENTS; i++) {
    if (lcs[i].mismatched || lcs[i].bad_outcomes)
      fail_msg("client %d: %llu mismatched, %llu bad (%s)", i,
               (unsigned long long)lcs[i].mismatched, (unsigned long long)lcs[i].bad_outcomes,
               lcs[i].problem);
    /* Each connection ends because the daemon closed it, not by a timeout. */
    assert_int_equal(lcs[i].end, VL_ERR_IO);
    answered += lcs[i].answered;
  }
  assert_true(answered > 0);
  assert_int_equal(rc, 0);
  struct stat st;
  assert_int_not_equal(stat(d.sock, &st), 0); /* the socket file is removed */
  daemon_cleanup(&d);
}

/* ---------------------------------------------------------------- hostile totals */

/* Each lowering of this graph saves 2^63 - 1 bytes (the report saturates): the daemon's running
 * total must saturate too, not overflow (signed overflow: undefined behaviour, an abort under
 * UBSan, a negative total otherwise). */
#define HUGE_SAVINGS_GRAPH                                                                         \
  "{\"graph\":{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":["                           \
  "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"int8\",\"shape\":"                  \
  "[2147483648,2147483648]}},{\"name\":\"a\",\"op\":\"call_function\",\"target\":"                 \
  "\"aten.view_copy.default\",\"args\":[\"x\",[4294967296,1073741824]],\"val\":{\"dtype\":"        \
  "\"int8\",\"shape\":[4294967296,1073741824]}},{\"name\":\"b\",\"op\":\"call_function\","         \
  "\"target\":\"aten.view_copy.default\",\"args\":[\"x\",[1073741824,4294967296]],\"val\":"        \
  "{\"dtype\":\"int8\",\"shape\":[1073741824,4294967296]}},{\"name\":\"c\",\"op\":"                \
  "\"call_function\",\"target\":\"custom.use.default\",\"args\":[\"a\",\"b\"],\"val\":"            \
  "{\"dtype\":\"int8\",\"shape\":[1]}},{\"name\":\"out\",\"op\":\"output\",\"args\":[\"c\"]}]}}"

static void stats_bytes_saved_saturates_instead_of_overflowing(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  daemon_start(&d, NULL);
  vl_client *c = client_open(&d);
  cJSON *params = cJSON_Parse(HUGE_SAVINGS_GRAPH);
  assert_non_null(params);
  for (int i = 0; i < 2; i++) { /* two: a wrapped total would read -2 */
    cJSON *res = NULL;
    vl_error err;
    vl_status s = vl_client_call(c, "lower", params, NULL, 0, &res, NULL, &err);
    if (s != VL_OK) {
      daemon_dump_log(&d);
      fail_msg("lower %d: %s (daemon/dispatch.c must saturate stats.bytes_saved)", i, err.message);
    }
    assert_true(json_number(res, "report.bytes_saved") == (double)INT64_MAX);
    cJSON_Delete(res);
  }
  cJSON *stats = NULL;
  vl_error err;
  assert_int_equal(vl_client_stats(c, &stats, &err), VL_OK);
  double total = json_number(stats, "bytes_saved");
  if (total != (double)INT64_MAX)
    fail_msg("stats.bytes_saved is %.17g after two saturated savings, want 2^63 - 1", total);
  cJSON_Delete(stats);
  cJSON_Delete(params);
  vl_client_close(c);
  assert_int_equal(daemon_stop(&d), 0);
  daemon_cleanup(&d);
}

/* ---------------------------------------------------------------- restarts */

static void restart_over_a_stale_socket_serves_at_once(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  daemon_start(&d, NULL);
  kill(d.pid, SIGKILL);
  assert_true(daemon_wait(d.pid, HARNESS_WAIT_MS) == 128 + SIGKILL);
  struct stat st;
  assert_int_equal(stat(d.sock, &st), 0); /* a killed daemon leaves its socket file */
  assert_true(S_ISSOCK(st.st_mode));
  for (int round = 0; round < 5; round++) {
    uint64_t t0 = now_ms();
    daemon_start(&d, NULL);
    ping_ok(d.sock);
    uint64_t took = now_ms() - t0;
    if (took > 3000) fail_msg("restart %d took %llu ms to serve", round, (unsigned long long)took);
    if (round % 2 == 0) {
      assert_int_equal(daemon_stop(&d), 0);
      assert_int_not_equal(stat(d.sock, &st), 0);
    } else {
      kill(d.pid, SIGKILL);
      assert_true(daemon_wait(d.pid, HARNESS_WAIT_MS) == 128 + SIGKILL);
      d.pid = -1;
    }
  }
  daemon_cleanup(&d);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(disconnects_mid_frame_leave_nothing_behind),
      cmocka_unit_test(disconnects_mid_response_leave_nothing_behind),
      cmocka_unit_test(disconnects_with_requests_in_flight_leave_nothing_behind),
      cmocka_unit_test(sigterm_answers_every_request_already_received),
      cmocka_unit_test(sigterm_under_load_loses_nothing_and_exits_0),
      cmocka_unit_test(stats_bytes_saved_saturates_instead_of_overflowing),
      cmocka_unit_test(restart_over_a_stale_socket_serves_at_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
