/* it_lifecycle.c - the daemon's life (docs/daemon.md): flags, socket path resolution, stale and
 * live sockets, socket mode, peer-credential access control, socket activation, sd_notify (path and
 * abstract sockets, watchdog), and SIGTERM with requests in flight. */
#define _GNU_SOURCE /* setresuid, setgroups */
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

enum { NOBODY = 65534 };

/* ---- helpers ---------------------------------------------------------------------------- */

/* A socket of type bound at path (or an abstract name when path starts with '@'). */
static int bound_socket(int type, const char *path) {
  int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  size_t len = strlen(path);
  assert_true(len < sizeof sa.sun_path);
  memcpy(sa.sun_path, path, len);
  socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
  if (path[0] == '@') {
    sa.sun_path[0] = '\0';
  } else {
    salen++;
  }
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, salen), 0);
  struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
  assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
  return fd;
}

/* Receives notify datagrams until one contains needle; false after HARNESS_WAIT_MS. */
static bool notified(int fd, const char *needle) {
  uint64_t deadline = now_ms() + HARNESS_WAIT_MS;
  char msg[512];
  while (now_ms() < deadline) {
    ssize_t n = recv(fd, msg, sizeof msg - 1, 0);
    if (n > 0) {
      msg[n] = '\0';
      if (strstr(msg, needle) != NULL) {
        return true;
      }
    }
  }
  return false;
}

/* Pipelines n heavy verify requests (ids 1..n) and then a ping (id 99), and waits for the
 * ping's answer: the daemon answers it as soon as it reads it, so afterwards every verify
 * frame has been received and is in flight. */
static void send_heavy_then_ping(vl_client *c, uint64_t n) {
  vl_error err;
  cJSON *params = json("{\"seed\":5}");
  cJSON_AddItemToObject(params, "graph", heavy_graph(1024, 2048));
  for (uint64_t id = 1; id <= n; id++) {
    assert_int_equal(vl_client_send(c, id, "verify", params, NULL, 0, &err), VL_OK);
  }
  cJSON_Delete(params);
  assert_int_equal(vl_client_send(c, 99, "ping", NULL, NULL, 0, &err), VL_OK);
  uint64_t id = 0;
  assert_int_equal(vl_client_recv(c, &id, NULL, NULL, &err), VL_OK);
  assert_int_equal(id, 99);
}

static void stop_and_clean(daemon_proc *d) {
  assert_int_equal(daemon_finish(d), 0);
}

/* Runs viewlowerd with args and returns its exit status (it must exit by itself). */
static int run_to_exit(daemon_proc *d, const char *const *args) {
  pid_t pid = daemon_spawn(d, args, NULL, -1);
  int rc = daemon_wait(pid, HARNESS_WAIT_MS);
  d->pid = -1;
  return rc;
}

/* ---- flags and paths -------------------------------------------------------------------- */

static void flags_are_checked_against_their_bounds(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  static const char *const help[] = {"--help", NULL};
  static const char *const unknown[] = {"--frobnicate", "1", NULL};
  static const char *const zero_workers[] = {"--workers", "0", NULL};
  static const char *const bad_mode[] = {"--socket-mode", "0999", NULL};
  static const char *const bad_level[] = {"--log-level=loud", NULL};
  static const char *const missing[] = {"--max-inflight", NULL};
  assert_int_equal(run_to_exit(&d, help), 0);
  assert_true(daemon_log_contains(&d, "--drain-timeout-ms"));
  assert_int_equal(run_to_exit(&d, unknown), 64);
  assert_int_equal(run_to_exit(&d, zero_workers), 64);
  assert_int_equal(run_to_exit(&d, bad_mode), 64);
  assert_int_equal(run_to_exit(&d, bad_level), 64);
  assert_int_equal(run_to_exit(&d, missing), 64);
  assert_true(daemon_log_contains(&d, "--workers: invalid value '0'"));
  daemon_cleanup(&d);
}

/* The nice of thread tid of process pid, from field 19 of /proc/PID/task/TID/stat. */
static int thread_nice(pid_t pid, const char *tid) {
  char path[96], line[1024];
  snprintf(path, sizeof path, "/proc/%d/task/%s/stat", (int)pid, tid);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t n = fread(line, 1, sizeof line - 1, f);
  fclose(f);
  line[n] = '\0';
  const char *p = strrchr(line, ')'); /* the command may hold spaces and parentheses */
  assert_non_null(p);
  int nice = 0;
  /* after ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
   * cutime cstime priority nice */
  assert_int_equal(
      sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %d", &nice),
      1);
  return nice;
}

/* Counts the daemon's threads whose nice is want, and all of them. */
static int threads_at_nice(pid_t pid, int want, int *all) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *dir = opendir(path);
  assert_non_null(dir);
  int at = 0;
  *all = 0;
  for (struct dirent *e; (e = readdir(dir)) != NULL;) {
    if (e->d_name[0] != '.') {
      at += thread_nice(pid, e->d_name) == want;
      ++*all;
    }
  }
  closedir(dir);
  return at;
}

/* Runs one verify (always on a worker) on a daemon started with args, and gives the nice of its
 * loop (the main thread) and how many of its threads are at base + delta. */
static int worker_threads_at(const char *const *args, int delta, int *loop_nice) {
  daemon_proc d;
  daemon_prepare(&d);
  daemon_start(&d, args);
  vl_client *c = client_open(&d);
  vl_error err;
  cJSON *params = json("{\"seed\":1}");
  cJSON_AddItemToObject(params, "graph", example_graph("reshape_chain.json"));
  cJSON *result = NULL;
  assert_int_equal(vl_client_call(c, "verify", params, NULL, 0, &result, NULL, &err), VL_OK);
  cJSON_Delete(result);
  cJSON_Delete(params);
  vl_client_close(c);
  char tid[24];
  snprintf(tid, sizeof tid, "%d", (int)d.pid);
  *loop_nice = thread_nice(d.pid, tid);
  int want = *loop_nice + delta > 19 ? 19 : *loop_nice + delta, all = 0;
  int at = threads_at_nice(d.pid, want, &all);
  int level = threads_at_nice(d.pid, *loop_nice, &all);
  assert_int_equal(delta == 0 ? level : at + level, all); /* no thread at any other nice */
  stop_and_clean(&d);
  return delta == 0 ? level : at;
}

static void workers_run_nicer_than_the_loop(void **state) {
  (void)state;
  errno = 0;
  int own = getpriority(PRIO_PROCESS, 0);
  assert_int_equal(errno, 0);
  if (own >= 19) {
    /* run at the highest nice (nice -n 19 ctest): no worker can be nicer than the loop */
    skip();
  }
  int loop_nice = 0;
  static const char *const by_default[] = {"--workers", "2", NULL};
  int all_level = worker_threads_at(by_default, 0, &loop_nice);
  assert_true(all_level >= 2); /* the loop and at least the worker, every thread at one nice */
  assert_int_equal(loop_nice, own);
  static const char *const ten[] = {"--workers", "2", "--worker-nice", "10", NULL};
  /* the worker that took the verify is 10 nicer; the loop keeps the nice it was started with */
  assert_true(worker_threads_at(ten, 10, &loop_nice) >= 1);
  assert_int_equal(loop_nice, own);
  static const char *const three[] = {"--workers", "1", "--worker-nice", "3", NULL};
  assert_int_equal(worker_threads_at(three, 3, &loop_nice), 1);
}

static void the_socket_gets_the_requested_mode(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  daemon_start(&d, NULL);
  struct stat st;
  assert_int_equal(stat(d.sock, &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0660);
  stop_and_clean(&d);
  daemon_prepare(&d);
  static const char *const args[] = {"--socket-mode=0600", NULL};
  daemon_start(&d, args);
  assert_int_equal(stat(d.sock, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  stop_and_clean(&d);
}

static void the_socket_path_comes_from_the_environment(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  char env_sock[96], runtime[64];
  snprintf(env_sock, sizeof env_sock, "VIEWLOWER_SOCKET=%s/env.sock", d.dir);
  const char *const env1[] = {env_sock, NULL};
  static const char *const args[] = {"--log-level", "debug", NULL};
  daemon_spawn(&d, args, env1, -1);
  daemon_wait_listening(&d, env_sock + strlen("VIEWLOWER_SOCKET="));
  assert_int_equal(daemon_stop(&d), 0);
  /* Removed at exit: a socket file we bound is ours to clean up. */
  assert_int_equal(access(env_sock + strlen("VIEWLOWER_SOCKET="), F_OK), -1);
  snprintf(runtime, sizeof runtime, "RUNTIME_DIRECTORY=%s", d.dir);
  const char *const env2[] = {runtime, NULL};
  daemon_spawn(&d, args, env2, -1);
  daemon_wait_listening(&d, d.sock); /* $RUNTIME_DIRECTORY/viewlower.sock */
  stop_and_clean(&d);
}

static void a_stale_socket_file_is_replaced(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  close(bound_socket(SOCK_STREAM, d.sock)); /* bound, never listened, left behind */
  daemon_start(&d, NULL);
  ping_ok(d.sock);
  assert_true(daemon_log_contains(&d, "replaced the stale socket"));
  stop_and_clean(&d);
}

static void a_live_socket_is_refused_and_keeps_serving(void **state) {
  (void)state;
  daemon_proc a, b;
  daemon_prepare(&a);
  daemon_prepare(&b);
  daemon_start(&a, NULL);
  const char *const args[] = {"--socket", a.sock, NULL};
  assert_int_equal(run_to_exit(&b, args), 1);
  assert_true(daemon_log_contains(&b, "another daemon is already listening"));
  ping_ok(a.sock);
  stop_and_clean(&a);
  daemon_cleanup(&b);
}

static void a_file_that_is_not_a_socket_is_left_alone(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  FILE *f = fopen(d.sock, "w");
  assert_non_null(f);
  fputs("precious", f);
  fclose(f);
  const char *const args[] = {"--socket", d.sock, NULL};
  assert_int_equal(run_to_exit(&d, args), 1);
  struct stat st;
  assert_int_equal(stat(d.sock, &st), 0);
  assert_true(S_ISREG(st.st_mode));
  assert_int_equal(st.st_size, 8);
  daemon_cleanup(&d);
}

/* ---- access control --------------------------------------------------------------------- */

/* In a child running as nobody: connect and ping; the exit status is the vl_status. */
static int ping_as_nobody(const char *sock) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (setgroups(0, NULL) != 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
        setresuid(NOBODY, NOBODY, NOBODY) != 0) {
      _exit(120);
    }
    vl_client *c = NULL;
    vl_error err;
    vl_status s = vl_client_connect(sock, HARNESS_WAIT_MS, &c, &err);
    if (s == VL_OK) {
      s = vl_client_ping(c, &err);
      if (s == VL_ERR_NOT_PERMITTED && strstr(err.message, "uid 65534") == NULL) {
        s = VL_ERR_INTERNAL;
      }
    }
    vl_client_close(c);
    _exit((int)s);
  }
  return daemon_wait(pid, HARNESS_WAIT_MS);
}

static int access_with(const char *const *extra) {
  daemon_proc d;
  daemon_prepare(&d);
  assert_int_equal(chmod(d.dir, 0755), 0);
  const char *args[8] = {"--socket-mode", "0666"};
  size_t n = 2;
  for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
    args[n++] = extra[i];
  }
  args[n] = NULL;
  daemon_start(&d, args);
  int rc = ping_as_nobody(d.sock);
  ping_ok(d.sock); /* root: the daemon's own uid, always let in */
  stop_and_clean(&d);
  return rc;
}

static void peers_are_let_in_by_uid_or_listed_uid_or_gid(void **state) {
  (void)state;
  if (geteuid() != 0) {
    skip(); /* needs root to become another user */
  }
  assert_int_equal(access_with(NULL), VL_ERR_NOT_PERMITTED);
  static const char *const by_uid[] = {"--allow-uid", "65534", NULL};
  assert_int_equal(access_with(by_uid), VL_OK);
  static const char *const by_gid[] = {"--allow-gid=65534", NULL};
  assert_int_equal(access_with(by_gid), VL_OK);
  static const char *const other[] = {"--allow-uid", "12345", "--allow-gid", "12345", NULL};
  assert_int_equal(access_with(other), VL_ERR_NOT_PERMITTED);
}

/* ---- systemd ---------------------------------------------------------------------------- */

static void socket_activation_serves_the_passed_socket_and_notifies(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  char notify_path[96], notify_env[128], act_path[96];
  snprintf(notify_path, sizeof notify_path, "%s/notify", d.dir);
  snprintf(notify_env, sizeof notify_env, "NOTIFY_SOCKET=%s", notify_path);
  snprintf(act_path, sizeof act_path, "%s/activated.sock", d.dir);
  int notify = bound_socket(SOCK_DGRAM, notify_path);
  int listener = bound_socket(SOCK_STREAM, act_path);
  assert_int_equal(listen(listener, 16), 0);
  const char *const env[] = {notify_env, NULL};
  static const char *const args[] = {"--log-level", "debug", NULL};
  daemon_spawn(&d, args, env, listener);
  close(listener);
  assert_true(notified(notify, "READY=1"));
  ping_ok(act_path);
  assert_true(daemon_log_contains(&d, "using the socket passed by systemd"));
  kill(d.pid, SIGTERM);
  assert_true(notified(notify, "STOPPING=1"));
  assert_int_equal(daemon_wait(d.pid, HARNESS_WAIT_MS), 0);
  d.pid = -1;
  /* The socket belongs to systemd: the daemon leaves the file alone. */
  assert_int_equal(access(act_path, F_OK), 0);
  close(notify);
  unlink(notify_path);
  unlink(act_path);
  daemon_cleanup(&d);
}

static void notify_reaches_an_abstract_socket_with_watchdog_pings(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  char name[64], notify_env[96];
  snprintf(name, sizeof name, "@viewlower-it-%d", (int)getpid());
  snprintf(notify_env, sizeof notify_env, "NOTIFY_SOCKET=%s", name);
  int notify = bound_socket(SOCK_DGRAM, name);
  const char *const env[] = {notify_env, "WATCHDOG_USEC=100000", NULL};
  const char *const args[] = {"--socket", d.sock, NULL};
  daemon_spawn(&d, args, env, -1);
  assert_true(notified(notify, "READY=1"));
  assert_true(notified(notify, "WATCHDOG=1"));
  assert_true(notified(notify, "WATCHDOG=1"));
  kill(d.pid, SIGTERM);
  assert_true(notified(notify, "STOPPING=1"));
  assert_int_equal(daemon_wait(d.pid, HARNESS_WAIT_MS), 0);
  d.pid = -1;
  close(notify);
  daemon_cleanup(&d);
}

/* ---- shutdown --------------------------------------------------------------------------- */

static void sigterm_answers_every_request_in_flight_and_exits_0(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  /* A drain bound no loaded machine reaches: every response must come. */
  static const char *const args[] = {"--workers", "2", "--drain-timeout-ms", "600000", NULL};
  daemon_start(&d, args);
  vl_client *c = client_open(&d);
  int idle = raw_connect(d.sock);
  vl_error err;
  enum { N = 4 };
  send_heavy_then_ping(c, N);
  kill(d.pid, SIGTERM);
  bool seen[N + 1] = {false};
  for (int i = 0; i < N; i++) {
    uint64_t id = 0;
    cJSON *r = NULL;
    vl_status s = vl_client_recv(c, &id, &r, NULL, &err);
    if (s != VL_OK) {
      daemon_dump_log(&d);
      fail_msg("request %llu: %s: %s", (unsigned long long)id, vl_status_kind(s), err.message);
    }
    assert_true(id >= 1 && id <= N && !seen[id]);
    seen[id] = true;
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "equal")));
    cJSON_Delete(r);
  }
  raw_expect_closed(idle);
  close(idle);
  assert_int_equal(vl_client_ping(c, &err), VL_ERR_IO); /* closed once drained */
  vl_client_close(c);
  assert_int_equal(daemon_wait(d.pid, HARNESS_WAIT_MS), 0);
  d.pid = -1;
  assert_false(daemon_log_contains(&d, ", 0 requests in flight"));
  assert_true(daemon_log_contains(&d, "requests in flight"));
  assert_int_equal(access(d.sock, F_OK), -1);
  daemon_cleanup(&d);
}

/* The daemon's threads named like the loops past the first ("viewlowerd-l1", ...). */
static int loop_threads(pid_t pid) {
  char path[320], comm[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *dir = opendir(path);
  assert_non_null(dir);
  int n = 0;
  for (struct dirent *e; (e = readdir(dir)) != NULL;) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "/proc/%d/task/%s/comm", (int)pid, e->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL) continue; /* a thread that just ended */
    n += fgets(comm, sizeof comm, f) != NULL && strncmp(comm, "viewlowerd-l", 12) == 0;
    fclose(f);
  }
  closedir(dir);
  return n;
}

/* --loops 3 runs two loops on threads of their own (--loops 1 none). A new connection goes to
 * the loop with the fewest, so six clients at once reach every loop (the readiness probe of
 * daemon_start may still hold one connection somewhere: a loop at one connection still gets
 * a client before any loop gets three). Each client's requests are answered on its loop, and
 * SIGTERM drains all loops: every request in flight is answered, each connection then closes,
 * and the daemon exits 0. */
static void connections_spread_over_the_loops_and_every_loop_drains(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  static const char *const one[] = {"--loops", "1", NULL};
  daemon_start(&d, one);
  assert_int_equal(loop_threads(d.pid), 0);
  stop_and_clean(&d);
  daemon_prepare(&d);
  static const char *const args[] = {"--loops", "3", "--workers", "2", "--drain-timeout-ms",
                                     "600000",  NULL};
  daemon_start(&d, args);
  assert_int_equal(loop_threads(d.pid), 2);
  enum { LOOPS = 3, CLIENTS = 6 };
  int before[LOOPS];
  char text[32];
  for (int k = 0; k < LOOPS; k++) {
    snprintf(text, sizeof text, "connected (loop %d)", k);
    before[k] = daemon_log_count(&d, text);
  }
  vl_client *c[CLIENTS];
  for (int i = 0; i < CLIENTS; i++) {
    c[i] = client_open(&d);
    send_heavy_then_ping(c[i], 1); /* answered: the connection is in, on its loop */
  }
  for (int k = 0; k < LOOPS; k++) {
    snprintf(text, sizeof text, "connected (loop %d)", k);
    assert_true(daemon_log_count(&d, text) - before[k] >= 1);
  }
  kill(d.pid, SIGTERM);
  vl_error err;
  for (int i = 0; i < CLIENTS; i++) {
    uint64_t id = 0;
    cJSON *r = NULL;
    vl_status s = vl_client_recv(c[i], &id, &r, NULL, &err);
    if (s != VL_OK) {
      daemon_dump_log(&d);
      fail_msg("client %d: %s: %s", i, vl_status_kind(s), err.message);
    }
    assert_int_equal(id, 1);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "equal")));
    cJSON_Delete(r);
    assert_int_equal(vl_client_ping(c[i], &err), VL_ERR_IO); /* closed once drained */
    vl_client_close(c[i]);
  }
  assert_int_equal(daemon_wait(d.pid, HARNESS_WAIT_MS), 0);
  d.pid = -1;
  assert_true(daemon_log_contains(&d, "stopped"));
  assert_int_equal(access(d.sock, F_OK), -1);
  daemon_cleanup(&d);
}

static void the_drain_timeout_bounds_the_shutdown(void **state) {
  (void)state;
  daemon_proc d;
  daemon_prepare(&d);
  /* The worker nicer than the loop, so that the loop takes the SIGTERM while verifies are still
   * queued: at the same nice, on a loaded machine, the worker could run all of them before the
   * loop ran again. Whether the first one has started by the end of the 1 ms drain is up to the
   * scheduler (at load 4 on 2 cores, sometimes none had), so only "some were still queued" is
   * asserted; that a running one finishes is sigterm_answers_every_request_in_flight_... */
  static const char *const args[] = {
      "--workers", "1", "--drain-timeout-ms", "1", "--max-inflight", "64", "--worker-nice",
      "10",        NULL};
  daemon_start(&d, args);
  vl_client *c = client_open(&d);
  /* Thirty-two, not four: on a loaded machine the loop thread may not run for a while after the
   * SIGTERM while the worker does; the last verifies must still be queued by then. */
  enum { N = 32 };
  send_heavy_then_ping(c, N);
  kill(d.pid, SIGTERM);
  /* One worker: at most one verify runs, the rest wait. After the 1 ms drain the waiting ones
   * are answered -32007 and a running one finishes: every request gets exactly one answer. */
  bool seen[N + 1] = {false};
  int shutting_down = 0;
  for (int i = 0; i < N; i++) {
    uint64_t id = 0;
    cJSON *r = NULL;
    vl_error err;
    vl_status s = vl_client_recv(c, &id, &r, NULL, &err);
    if (s != VL_OK && s != VL_ERR_SHUTTING_DOWN) {
      daemon_dump_log(&d);
      fail_msg("request %llu: %s: %s", (unsigned long long)id, vl_status_kind(s), err.message);
    }
    assert_true(id >= 1 && id <= N && !seen[id]);
    seen[id] = true;
    if (s == VL_ERR_SHUTTING_DOWN) {
      shutting_down++;
      assert_string_equal(err.message,
                          "shutting down: the drain timeout passed before this request started");
    } else {
      assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "equal")));
    }
    cJSON_Delete(r);
  }
  if (shutting_down < 1) {
    daemon_dump_log(&d);
    fail_msg("none of %d requests answered -32007: the drain waited for queued ones", N);
  }
  assert_int_equal(daemon_wait(d.pid, HARNESS_WAIT_MS), 0);
  d.pid = -1;
  assert_true(daemon_log_contains(&d, "drain timeout of 1 ms"));
  vl_client_close(c);
  daemon_cleanup(&d);
}

int main(void) {
  unsetenv("VIEWLOWER_SOCKET");
  unsetenv("RUNTIME_DIRECTORY");
  unsetenv("NOTIFY_SOCKET");
  unsetenv("LISTEN_FDS");
  unsetenv("LISTEN_PID");
  unsetenv("WATCHDOG_USEC");
  unsetenv("WATCHDOG_PID");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(flags_are_checked_against_their_bounds),
      cmocka_unit_test(the_socket_gets_the_requested_mode),
      cmocka_unit_test(workers_run_nicer_than_the_loop),
      cmocka_unit_test(the_socket_path_comes_from_the_environment),
      cmocka_unit_test(a_stale_socket_file_is_replaced),
      cmocka_unit_test(a_live_socket_is_refused_and_keeps_serving),
      cmocka_unit_test(a_file_that_is_not_a_socket_is_left_alone),
      cmocka_unit_test(peers_are_let_in_by_uid_or_listed_uid_or_gid),
      cmocka_unit_test(socket_activation_serves_the_passed_socket_and_notifies),
      cmocka_unit_test(notify_reaches_an_abstract_socket_with_watchdog_pings),
      cmocka_unit_test(sigterm_answers_every_request_in_flight_and_exits_0),
      cmocka_unit_test(the_drain_timeout_bounds_the_shutdown),
      cmocka_unit_test(connections_spread_over_the_loops_and_every_loop_drains),
  };
  return harness_result(cmocka_run_group_tests(tests, NULL, NULL));
}
