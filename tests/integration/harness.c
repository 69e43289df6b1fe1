/* harness.c - process, socket and JSON helpers of the daemon integration tests. */
#define _GNU_SOURCE /* mkdtemp, setenv in the child */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <dirent.h>

#include "viewlower/frame.h"

/* Everything started or created, so that a failing test (which leaves its function through
 * cmocka's longjmp) still leaves no daemon running and no directory behind: cleaned at exit. */
enum { MAX_TRACKED = 64 };
static pid_t tracked_pids[MAX_TRACKED];
static char tracked_dirs[MAX_TRACKED][32];
static bool cleanup_registered;

static void remove_dir(const char *dir) {
  DIR *dh = opendir(dir);
  if (dh == NULL) {
    return;
  }
  struct dirent *e;
  char path[512];
  while ((e = readdir(dh)) != NULL) {
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      unlink(path);
    }
  }
  closedir(dh);
  rmdir(dir);
}

static void cleanup_at_exit(void) {
  for (size_t i = 0; i < MAX_TRACKED; i++) {
    if (tracked_pids[i] > 0) {
      kill(tracked_pids[i], SIGKILL);
      waitpid(tracked_pids[i], NULL, 0);
    }
    if (tracked_dirs[i][0] != '\0') {
      remove_dir(tracked_dirs[i]);
    }
  }
}

static void track_pid(pid_t pid) {
  for (size_t i = 0; i < MAX_TRACKED; i++) {
    if (tracked_pids[i] <= 0) {
      tracked_pids[i] = pid;
      return;
    }
  }
}

/* The process was reaped: forget it. */
static void untrack_pid(pid_t pid) {
  for (size_t i = 0; i < MAX_TRACKED; i++) {
    if (tracked_pids[i] == pid) {
      tracked_pids[i] = 0;
    }
  }
}

static void track_dir(const char *dir, bool on) {
  if (!cleanup_registered) {
    atexit(cleanup_at_exit);
    cleanup_registered = true;
  }
  for (size_t i = 0; i < MAX_TRACKED; i++) {
    if (on && tracked_dirs[i][0] == '\0') {
      snprintf(tracked_dirs[i], sizeof tracked_dirs[i], "%s", dir);
      return;
    }
    if (!on && strcmp(tracked_dirs[i], dir) == 0) {
      tracked_dirs[i][0] = '\0';
      return;
    }
  }
}

uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

void daemon_prepare(daemon_proc *d) {
  memset(d, 0, sizeof *d);
  d->pid = -1;
  snprintf(d->dir, sizeof d->dir, "/tmp/vlit.XXXXXX");
  assert_non_null(mkdtemp(d->dir));
  track_dir(d->dir, true);
  snprintf(d->sock, sizeof d->sock, "%s/viewlower.sock", d->dir);
  snprintf(d->log, sizeof d->log, "%s/daemon.log", d->dir);
}

/* In the child: stdout/stderr to the log, fd 3 from listen_fd, the environment, exec. */
static void exec_child(const daemon_proc *d, const char *const *argv, const char *const *env,
                       int listen_fd) {
  int log = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log >= 0) {
    dup2(log, 1);
    dup2(log, 2);
  }
  if (d->nofile_soft > 0) {
    struct rlimit rl = {.rlim_cur = d->nofile_soft, .rlim_max = d->nofile_hard};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
      _exit(126);
    }
  }
  if (listen_fd >= 0) {
    if (listen_fd != 3) {
      dup2(listen_fd, 3); /* dup2 clears FD_CLOEXEC on the copy */
    } else {
      fcntl(3, F_SETFD, 0);
    }
    char pid[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    setenv("LISTEN_PID", pid, 1);
    setenv("LISTEN_FDS", "1", 1);
  }
  for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
    putenv((char *)env[i]);
  }
  const char *vg = getenv("VL_IT_VALGRIND");
  if (vg != NULL && vg[0] != '\0') {
    /* The same daemon under memcheck, in the same process (LISTEN_PID still holds); any
     * memory error or leak makes it exit 1, which fails the test's exit-status check, and
     * the report goes to the daemon's log. valgrind runs one thread at a time; its fair
     * scheduler hands the lock round in turn, so a worker computing without system calls
     * cannot keep the event loop from its next turn (with the default lock a 16 MiB verify
     * ran to its end between two of the loop's passes, on every run of it_protocol's
     * overload test on one machine). */
    const char *vargv[HARNESS_MAX_ARGS + 9] = {"valgrind",
                                               "--quiet",
                                               "--fair-sched=yes",
                                               "--leak-check=full",
                                               "--error-exitcode=1",
                                               "--errors-for-leak-kinds=definite,indirect,possible",
                                               "--log-fd=2",
                                               VIEWLOWERD_PATH};
    size_t n = 8;
    for (size_t i = 1; argv[i] != NULL && n + 1 < sizeof vargv / sizeof vargv[0]; i++) {
      vargv[n++] = argv[i];
    }
    vargv[n] = NULL;
    execvp("valgrind", (char *const *)vargv);
    _exit(127);
  }
  execv(VIEWLOWERD_PATH, (char *const *)argv);
  _exit(127);
}

pid_t daemon_spawn(daemon_proc *d, const char *const *args, const char *const *env, int listen_fd) {
  const char *argv[HARNESS_MAX_ARGS + 2] = {"viewlowerd"};
  size_t n = 1;
  for (size_t i = 0; args != NULL && args[i] != NULL; i++) {
    assert_true(n < HARNESS_MAX_ARGS);
    argv[n++] = args[i];
  }
  argv[n] = NULL;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    exec_child(d, argv, env, listen_fd);
  }
  track_pid(pid);
  d->pid = pid;
  return pid;
}

static bool can_connect(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
  bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
  if (fd >= 0) {
    close(fd);
  }
  return ok;
}

/* Under valgrind the daemon runs tens of times slower (a 64 MiB view_copy took 127 s on a
 * loaded 2-core machine), so its waits get 8 times as long: 8 minutes, inside the valgrind
 * tests' 600 s ctest TIMEOUT, which stays the backstop. */
int daemon_wait_ms(void) {
  const char *vg = getenv("VL_IT_VALGRIND");
  return vg != NULL && vg[0] != '\0' ? 8 * HARNESS_WAIT_MS : HARNESS_WAIT_MS;
}

void daemon_wait_listening(const daemon_proc *d, const char *path) {
  uint64_t deadline = now_ms() + (uint64_t)daemon_wait_ms();
  while (!can_connect(path)) {
    int status;
    bool exited = waitpid(d->pid, &status, WNOHANG) == d->pid;
    if (exited) {
      untrack_pid(d->pid);
    }
    if (exited || now_ms() > deadline) {
      daemon_dump_log(d);
      fail_msg("viewlowerd did not start listening on %s", path);
    }
    sleep_ms(5);
  }
}

void daemon_start(daemon_proc *d, const char *const *args) {
  const char *argv[HARNESS_MAX_ARGS] = {"--socket", d->sock, "--log-level", "debug"};
  size_t n = 4;
  for (size_t i = 0; args != NULL && args[i] != NULL; i++) {
    assert_true(n + 1 < HARNESS_MAX_ARGS);
    argv[n++] = args[i];
  }
  argv[n] = NULL;
  daemon_spawn(d, argv, NULL, -1);
  daemon_wait_listening(d, d->sock);
}

int daemon_wait(pid_t pid, int timeout_ms) {
  uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
  for (;;) {
    int status;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      untrack_pid(pid);
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (r < 0 || now_ms() > deadline) {
      return -1;
    }
    sleep_ms(2);
  }
}

int daemon_stop(daemon_proc *d) {
  if (d->pid <= 0) {
    return -1;
  }
  kill(d->pid, SIGTERM);
  int rc = daemon_wait(d->pid, daemon_wait_ms());
  if (rc < 0) {
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    untrack_pid(d->pid);
    d->pid = -1;
    daemon_dump_log(d);
    fail_msg("viewlowerd did not exit after SIGTERM");
  }
  d->pid = -1;
  return rc;
}

void daemon_cleanup(daemon_proc *d) {
  if (d->pid > 0) {
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    untrack_pid(d->pid);
    d->pid = -1;
  }
  if (d->dir[0] == '\0') {
    return;
  }
  remove_dir(d->dir);
  track_dir(d->dir, false);
  d->dir[0] = '\0';
}

/* Daemons that ended with a non-zero status (see harness_result). */
static int finish_failures;

int daemon_finish(daemon_proc *d) {
  int rc = daemon_stop(d);
  if (rc != 0 || getenv("VL_IT_DUMP_LOG") != NULL) {
    finish_failures += rc != 0;
    daemon_dump_log(d);
  }
  daemon_cleanup(d);
  return rc;
}

daemon_proc *daemon_new(const char *const *args) {
  daemon_proc *d = calloc(1, sizeof *d);
  assert_non_null(d);
  daemon_prepare(d);
  daemon_start(d, args);
  return d;
}

void daemon_delete(daemon_proc *d) {
  int rc = daemon_finish(d);
  free(d);
  assert_int_equal(rc, 0);
}

size_t raw_send_until_stalled(int fd, const void *p, size_t n) {
  const uint8_t *b = p;
  size_t off = 0;
  while (off < n) {
    ssize_t w = send(fd, b + off, n - off, MSG_NOSIGNAL);
    if (w > 0) {
      off += (size_t)w;
      continue;
    }
    struct pollfd pfd = {.fd = fd, .events = POLLOUT};
    if (w < 0 && errno != EAGAIN) break;
    if (poll(&pfd, 1, 500) == 0) break;
  }
  return off;
}

void raw_set_nonblocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

int harness_result(int failed_tests) {
  if (finish_failures > 0) {
    fprintf(stderr, "%d daemon(s) ended with a non-zero exit status\n", finish_failures);
  }
  return failed_tests != 0 || finish_failures > 0 ? 1 : 0;
}

void daemon_dump_log(const daemon_proc *d) {
  FILE *f = fopen(d->log, "r");
  if (f == NULL) {
    return;
  }
  char line[1024];
  fprintf(stderr, "---- %s ----\n", d->log);
  while (fgets(line, sizeof line, f) != NULL) {
    fputs(line, stderr);
  }
  fclose(f);
}

bool daemon_log_contains(const daemon_proc *d, const char *text) {
  FILE *f = fopen(d->log, "r");
  if (f == NULL) {
    return false;
  }
  char line[2048];
  bool found = false;
  while (!found && fgets(line, sizeof line, f) != NULL) {
    found = strstr(line, text) != NULL;
  }
  fclose(f);
  return found;
}

int daemon_log_count(const daemon_proc *d, const char *text) {
  FILE *f = fopen(d->log, "r");
  if (f == NULL) {
    return 0;
  }
  char line[2048];
  int n = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    n += strstr(line, text) != NULL;
  }
  fclose(f);
  return n;
}

long proc_status_kb(pid_t pid, const char *field) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  long v = -1;
  size_t n = strlen(field);
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, field, n) == 0 && line[n] == ':') {
      v = strtol(line + n + 1, NULL, 10);
    }
  }
  if (f != NULL) {
    fclose(f);
  }
  return v;
}

vl_client *client_open(const daemon_proc *d) {
  vl_client *c = NULL;
  vl_error err;
  vl_status s = vl_client_connect(d->sock, daemon_wait_ms(), &c, &err);
  if (s != VL_OK) {
    fail_msg("connect %s: %s", d->sock, err.message);
  }
  return c;
}

void ping_ok(const char *path) {
  vl_client *c = NULL;
  vl_error err;
  vl_status s = vl_client_connect(path, HARNESS_WAIT_MS, &c, &err);
  if (s == VL_OK) {
    s = vl_client_ping(c, &err);
  }
  vl_client_close(c);
  if (s != VL_OK) {
    fail_msg("ping %s: %s", path, err.message);
  }
}

/* ---- raw frames --------------------------------------------------------------------------- */

int raw_connect(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  struct timeval tv = {.tv_sec = HARNESS_WAIT_MS / 1000, .tv_usec = 0};
  assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
  assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv), 0);
  return fd;
}

void raw_send(int fd, const void *p, size_t n) {
  const uint8_t *at = p;
  while (n > 0) {
    ssize_t w = send(fd, at, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) {
      continue;
    }
    assert_true(w > 0);
    at += w;
    n -= (size_t)w;
  }
}

void raw_send_frame(int fd, const char *json, const void *payload, size_t payload_len) {
  uint8_t h[VL_FRAME_HEADER_SIZE];
  vl_frame_header_encode(h, (uint32_t)strlen(json), payload_len);
  raw_send(fd, h, sizeof h);
  raw_send(fd, json, strlen(json));
  if (payload_len > 0) {
    raw_send(fd, payload, payload_len);
  }
}

static void raw_recv_exact(int fd, void *p, size_t n) {
  uint8_t *at = p;
  while (n > 0) {
    ssize_t r = recv(fd, at, n, 0);
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      fail_msg("recv: %s", r == 0 ? "connection closed" : strerror(errno));
    }
    at += r;
    n -= (size_t)r;
  }
}

cJSON *raw_recv_frame(int fd, vl_buf *payload) {
  uint8_t h[VL_FRAME_HEADER_SIZE];
  raw_recv_exact(fd, h, sizeof h);
  vl_frame_header hdr;
  vl_error err;
  assert_int_equal(vl_frame_header_decode(h, &hdr, &err), VL_OK);
  char *text = malloc((size_t)hdr.json_len + 1);
  assert_non_null(text);
  raw_recv_exact(fd, text, hdr.json_len);
  text[hdr.json_len] = '\0';
  if (hdr.payload_len > 0) {
    assert_non_null(payload);
    void *p = vl_buf_extend(payload, (size_t)hdr.payload_len);
    assert_non_null(p);
    raw_recv_exact(fd, p, (size_t)hdr.payload_len);
  }
  cJSON *doc = cJSON_Parse(text);
  if (doc == NULL) {
    fail_msg("response is not JSON: %s", text);
  }
  free(text);
  return doc;
}

void raw_expect_error(int fd, int code, int64_t id, const char *kind) {
  cJSON *doc = raw_recv_frame(fd, NULL);
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(doc, "error");
  const cJSON *jid = cJSON_GetObjectItemCaseSensitive(doc, "id");
  assert_non_null(e);
  assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "jsonrpc")),
                      "2.0");
  assert_int_equal((int)json_number(e, "code"), code);
  assert_non_null(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "message")));
  const cJSON *data = cJSON_GetObjectItemCaseSensitive(e, "data");
  assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(data, "kind")), kind);
  if (id < 0) {
    assert_true(cJSON_IsNull(jid));
  } else {
    assert_true(cJSON_IsNumber(jid));
    assert_true(jid->valuedouble == (double)id);
  }
  cJSON_Delete(doc);
}

void raw_expect_closed(int fd) {
  uint8_t b;
  ssize_t r;
  do {
    r = recv(fd, &b, 1, 0);
  } while (r < 0 && errno == EINTR);
  if (r != 0 && !(r < 0 && errno == ECONNRESET)) {
    fail_msg("expected the daemon to close the connection, got %zd (%s)", r,
             r < 0 ? strerror(errno) : "data");
  }
}

/* ---- JSON ------------------------------------------------------------------------------- */

cJSON *example_graph(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/graphs/%s", VL_EXAMPLES_DIR, name);
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fail_msg("cannot open %s", path);
  }
  char *text = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len + 4096 > cap) {
      cap = cap * 2 + 8192;
      text = realloc(text, cap);
      assert_non_null(text);
    }
    size_t r = fread(text + len, 1, cap - len - 1, f);
    len += r;
    if (r == 0) {
      break;
    }
  }
  fclose(f);
  text[len] = '\0';
  cJSON *doc = cJSON_Parse(text);
  free(text);
  assert_non_null(doc);
  return doc;
}

cJSON *heavy_graph(int rows, int cols) {
  char text[2048];
  snprintf(text, sizeof text,
           "{\"format\":\"viewlower.graph\",\"version\":1,\"name\":\"heavy\",\"nodes\":["
           "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\","
           "\"shape\":[%d,%d]}},"
           "{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"aten.relu.default\","
           "\"args\":[\"x\"],\"val\":{\"dtype\":\"float32\",\"shape\":[%d,%d]}},"
           "{\"name\":\"t\",\"op\":\"call_function\",\"target\":\"aten.transpose_copy.int\","
           "\"args\":[\"y\",0,1],\"val\":{\"dtype\":\"float32\",\"shape\":[%d,%d]}},"
           "{\"name\":\"v\",\"op\":\"call_function\",\"target\":\"aten.view_copy.default\","
           "\"args\":[\"t\",[-1]],\"val\":{\"dtype\":\"float32\",\"shape\":[%d]}},"
           "{\"name\":\"z\",\"op\":\"call_function\",\"target\":\"aten.mul.Tensor\","
           "\"args\":[\"v\",2.0],\"val\":{\"dtype\":\"float32\",\"shape\":[%d]}},"
           "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"z\"]}]}",
           rows, cols, rows, cols, cols, rows, rows * cols, rows * cols);
  return json(text);
}

cJSON *json(const char *text) {
  cJSON *doc = cJSON_Parse(text);
  if (doc == NULL) {
    fail_msg("bad test JSON: %s", text);
  }
  return doc;
}

double json_number(const cJSON *obj, const char *dotted) {
  char key[128];
  const char *p = dotted;
  const cJSON *at = obj;
  while (*p != '\0') {
    size_t n = strcspn(p, ".");
    assert_true(n < sizeof key);
    memcpy(key, p, n);
    key[n] = '\0';
    at = cJSON_GetObjectItemCaseSensitive(at, key);
    if (at == NULL) {
      fail_msg("no member %s", dotted);
    }
    p += n + (p[n] == '.');
  }
  assert_true(cJSON_IsNumber(at));
  return at->valuedouble;
}
