/* it_concurrency.c - many requests at once (docs/protocol.md, docs/daemon.md): pipelined requests
 * answered out of order with their ids, 32 concurrent clients x 200 requests all answered,
 * back-pressure under a small in-flight limit loses nothing, a stalled half-frame client delays
 * nobody and is closed by the idle timeout, and the connection limit answers -32005. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "viewlower/frame.h"

enum { IDLE_MS = 1000, CLIENTS = 32, PER_CLIENT = 200, WINDOW = 8 };

static int setup(void **state) {
  daemon_proc *d = calloc(1, sizeof *d);
  assert_non_null(d);
  daemon_prepare(d);
  static const char *const args[] = {"--workers", "4", "--max-inflight", "4", "--idle-timeout-ms",
                                     "1000",      NULL};
  daemon_start(d, args);
  *state = d;
  return 0;
}

static int teardown(void **state) {
  daemon_proc *d = *state;
  int rc = daemon_finish(d);
  free(d);
  assert_int_equal(rc, 0);
  return 0;
}

static void expect_recv(vl_client *c, uint64_t want_id, vl_status want) {
  uint64_t id = 0;
  cJSON *r = NULL;
  vl_error err;
  vl_status s = vl_client_recv(c, &id, &r, NULL, &err);
  if (s != want || id != want_id) {
    fail_msg("got id %llu status %s (%s), wanted id %llu status %s", (unsigned long long)id,
             vl_status_kind(s), err.message, (unsigned long long)want_id, vl_status_kind(want));
  }
  cJSON_Delete(r);
}

static void pipelined_requests_are_answered_out_of_order_with_their_ids(void **state) {
  daemon_proc *d = *state;
  vl_client *c = client_open(d);
  vl_error err;
  cJSON *heavy = json("{\"seed\":3}");
  cJSON_AddItemToObject(heavy, "graph", heavy_graph(2048, 2048));
  cJSON *small = json("{}");
  cJSON_AddItemToObject(small, "graph", example_graph("reshape_chain.json"));
  assert_int_equal(vl_client_send(c, 1, "verify", heavy, NULL, 0, &err), VL_OK);
  assert_int_equal(vl_client_send(c, 2, "ping", NULL, NULL, 0, &err), VL_OK);
  assert_int_equal(vl_client_send(c, 3, "lower", small, NULL, 0, &err), VL_OK);
  assert_int_equal(vl_client_send(c, 4, "frobnicate", NULL, NULL, 0, &err), VL_OK);
  bool seen[5] = {false};
  for (int i = 0; i < 3; i++) {
    uint64_t id = 0;
    cJSON *r = NULL;
    vl_status s = vl_client_recv(c, &id, &r, NULL, &err);
    assert_true(id >= 2 && id <= 4);
    assert_false(seen[id]);
    seen[id] = true;
    assert_int_equal(s, id == 4 ? VL_ERR_UNKNOWN_METHOD : VL_OK);
    cJSON_Delete(r);
  }
  expect_recv(c, 1, VL_OK); /* the heavy verify, last */
  cJSON_Delete(heavy);
  cJSON_Delete(small);
  vl_client_close(c);
}

typedef struct client_run {
  const char *sock;
  unsigned index;
  cJSON *graph; /* this thread's own copy */
  unsigned answered;
  char failure[VL_ERROR_MESSAGE_MAX + 128];
} client_run;

/* Sends a window of requests, then receives them, checking that each id comes back once. */
static bool run_window(vl_client *c, client_run *run, unsigned first, cJSON *lower_params) {
  static const char *const methods[] = {"ping", "version", "lower"};
  vl_error err;
  uint64_t base = (uint64_t)run->index * 1000000u;
  for (unsigned k = 0; k < WINDOW; k++) {
    unsigned n = first + k;
    const char *m = methods[n % 3];
    if (vl_client_send(c, base + n, m, n % 3 == 2 ? lower_params : NULL, NULL, 0, &err) != VL_OK) {
      snprintf(run->failure, sizeof run->failure, "send %u: %s", n, err.message);
      return false;
    }
  }
  bool seen[WINDOW] = {false};
  for (unsigned k = 0; k < WINDOW; k++) {
    uint64_t id = 0;
    cJSON *r = NULL;
    vl_status s = vl_client_recv(c, &id, &r, NULL, &err);
    bool ok = s == VL_OK && r != NULL && id >= base + first && id < base + first + WINDOW &&
              !seen[id - base - first];
    cJSON_Delete(r);
    if (!ok) {
      snprintf(run->failure, sizeof run->failure, "recv: status %s id %llu: %s", vl_status_kind(s),
               (unsigned long long)id, err.message);
      return false;
    }
    seen[id - base - first] = true;
    run->answered++;
  }
  return true;
}

static void *client_thread(void *arg) {
  client_run *run = arg;
  vl_client *c = NULL;
  vl_error err;
  if (vl_client_connect(run->sock, HARNESS_WAIT_MS, &c, &err) != VL_OK) {
    snprintf(run->failure, sizeof run->failure, "connect: %s", err.message);
    return NULL;
  }
  cJSON *params = cJSON_CreateObject();
  cJSON_AddItemToObject(params, "graph", run->graph);
  run->graph = NULL;
  for (unsigned first = 0; first < PER_CLIENT; first += WINDOW) {
    if (!run_window(c, run, first, params)) {
      break;
    }
  }
  cJSON_Delete(params);
  vl_client_close(c);
  return NULL;
}

static void thirty_two_clients_of_200_requests_are_all_answered(void **state) {
  daemon_proc *d = *state;
  cJSON *graph = example_graph("reshape_chain.json");
  client_run runs[CLIENTS];
  pthread_t threads[CLIENTS];
  memset(runs, 0, sizeof runs);
  for (unsigned i = 0; i < CLIENTS; i++) {
    runs[i].sock = d->sock;
    runs[i].index = i + 1;
    runs[i].graph = cJSON_Duplicate(graph, true);
    assert_non_null(runs[i].graph);
  }
  for (unsigned i = 0; i < CLIENTS; i++) {
    assert_int_equal(pthread_create(&threads[i], NULL, client_thread, &runs[i]), 0);
  }
  unsigned total = 0;
  for (unsigned i = 0; i < CLIENTS; i++) {
    pthread_join(threads[i], NULL);
    if (runs[i].failure[0] != '\0') {
      fail_msg("client %u: %s", i, runs[i].failure);
    }
    total += runs[i].answered;
  }
  assert_int_equal(total, CLIENTS * PER_CLIENT);
  cJSON_Delete(graph);
  vl_client *c = client_open(d);
  vl_error err;
  cJSON *stats = NULL;
  assert_int_equal(vl_client_stats(c, &stats, &err), VL_OK);
  assert_true(json_number(stats, "requests.total") >= CLIENTS * PER_CLIENT);
  assert_true(json_number(stats, "connections.total") >= CLIENTS);
  assert_int_equal((int)json_number(stats, "requests.by_method.lower.errors"), 0);
  cJSON_Delete(stats);
  vl_client_close(c);
}

static void a_small_inflight_limit_holds_back_reading_but_loses_nothing(void **state) {
  daemon_proc *d = *state;
  vl_client *c = client_open(d);
  vl_error err;
  cJSON *params = cJSON_CreateObject();
  cJSON_AddItemToObject(params, "graph", example_graph("patch_embed.json"));
  enum { N = 48 }; /* far over --max-inflight 4, small enough for the socket buffers */
  for (uint64_t id = 1; id <= N; id++) {
    assert_int_equal(vl_client_send(c, id, "lower", params, NULL, 0, &err), VL_OK);
  }
  bool seen[N + 1] = {false};
  for (int i = 0; i < N; i++) {
    uint64_t id = 0;
    assert_int_equal(vl_client_recv(c, &id, NULL, NULL, &err), VL_OK);
    assert_true(id >= 1 && id <= N && !seen[id]);
    seen[id] = true;
  }
  cJSON_Delete(params);
  vl_client_close(c);
}

static void a_client_that_stops_reading_is_closed_by_the_idle_timeout(void **state) {
  daemon_proc *d = *state;
  enum { NUMEL = 1 << 18 }; /* 1 MiB in, several MiB of JSON values out */
  float *in = calloc(NUMEL, sizeof *in);
  assert_non_null(in);
  char text[256];
  snprintf(text, sizeof text,
           "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"view_copy\",\"params\":{\"input\":"
           "{\"dtype\":\"float32\",\"shape\":[%d],\"blob\":{\"offset\":0,\"nbytes\":%d}},"
           "\"size\":[-1]}}",
           NUMEL, NUMEL * 4);
  int fd = raw_connect(d->sock);
  raw_send_frame(fd, text, in, (size_t)NUMEL * 4);
  free(in);
  uint64_t deadline = now_ms() + HARNESS_WAIT_MS;
  while (!daemon_log_contains(d, "not reading its responses") && now_ms() < deadline) {
    sleep_ms(10);
  }
  assert_true(daemon_log_contains(d, "not reading its responses"));
  close(fd);
}

static void a_stalled_half_frame_delays_nobody_and_the_idle_timeout_closes_it(void **state) {
  daemon_proc *d = *state;
  int stalled = raw_connect(d->sock);
  uint8_t h[VL_FRAME_HEADER_SIZE];
  vl_frame_header_encode(h, 100, 0);
  raw_send(stalled, h, 10);
  uint64_t t0 = now_ms();
  vl_client *c = client_open(d);
  vl_error err;
  uint64_t worst = 0;
  for (int i = 0; i < 50; i++) {
    uint64_t t = now_ms();
    assert_int_equal(vl_client_ping(c, &err), VL_OK);
    worst = now_ms() - t > worst ? now_ms() - t : worst;
  }
  assert_true(worst < 250);
  raw_expect_closed(stalled);
  uint64_t closed_after = now_ms() - t0;
  close(stalled);
  assert_true(closed_after >= IDLE_MS - 100);
  assert_true(closed_after < 4 * IDLE_MS);
  vl_client_close(c);
}

/* A client whose ping went through: retried while the daemon still counts connections that
 * were closed a moment ago (it learns of a close asynchronously). */
static vl_client *client_admitted(const daemon_proc *d) {
  vl_error err;
  for (int tries = 0; tries < 500; tries++) {
    vl_client *c = client_open(d);
    vl_status s = vl_client_ping(c, &err);
    if (s == VL_OK) {
      return c;
    }
    assert_int_equal(s, VL_ERR_OVERLOADED);
    vl_client_close(c);
    sleep_ms(10);
  }
  fail_msg("no connection slot came free");
  return NULL;
}

static void connections_over_the_limit_get_overloaded_then_close(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  static const char *const args[] = {"--max-connections", "2", NULL};
  daemon_start(&d, args);
  vl_client *a = client_admitted(&d);
  vl_client *b = client_admitted(&d);
  int third = raw_connect(d.sock);
  raw_expect_error(third, -32005, -1, "overloaded");
  raw_expect_closed(third);
  close(third);
  vl_error err;
  vl_client *refused = client_open(&d);
  assert_int_equal(vl_client_ping(refused, &err), VL_ERR_OVERLOADED);
  assert_string_equal(err.message, "too many connections (limit 2)");
  assert_int_equal(vl_client_ping(refused, &err), VL_ERR_IO);
  vl_client_close(refused);
  assert_int_equal(vl_client_ping(a, &err), VL_OK); /* the admitted ones are unaffected */
  vl_client_close(a);
  vl_client *c = client_admitted(&d); /* a's slot is free again */
  vl_client_close(c);
  vl_client_close(b);
  assert_int_equal(daemon_stop(&d), 0);
  daemon_cleanup(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pipelined_requests_are_answered_out_of_order_with_their_ids),
      cmocka_unit_test(thirty_two_clients_of_200_requests_are_all_answered),
      cmocka_unit_test(a_small_inflight_limit_holds_back_reading_but_loses_nothing),
      cmocka_unit_test(a_stalled_half_frame_delays_nobody_and_the_idle_timeout_closes_it),
      cmocka_unit_test(a_client_that_stops_reading_is_closed_by_the_idle_timeout),
      cmocka_unit_test(connections_over_the_limit_get_overloaded_then_close),
  };
  return harness_result(cmocka_run_group_tests(tests, setup, teardown));
}
