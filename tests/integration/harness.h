/* harness.h - helpers of the daemon integration tests: start a real viewlowerd on a socket in
 * a fresh temporary directory, stop it and collect its exit status, speak raw frames to it,
 * and read the example graphs. Every wait is bounded (HARNESS_WAIT_MS). */
#ifndef VIEWLOWER_IT_HARNESS_H
#define VIEWLOWER_IT_HARNESS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "viewlower/buf.h"
#include "viewlower/client.h"

/* The bound of every wait (a failure's, never a pacing): a minute, since a CI machine with both
 * cores busy runs a test several times slower (a 12 MB values response took over 20 s at a
 * load of 9 on 2 cores). */
#define HARNESS_WAIT_MS 60000
#define HARNESS_MAX_ARGS 32

typedef struct daemon_proc {
  pid_t pid;
  char dir[32];  /* temporary directory, removed by daemon_cleanup */
  char sock[64]; /* dir/viewlower.sock */
  char log[64];  /* dir/daemon.log: the daemon's stderr */
  unsigned long nofile_soft, nofile_hard; /* RLIMIT_NOFILE of the daemon when non-zero */
} daemon_proc;

/* Makes the temporary directory and fills the paths; no process yet. */
void daemon_prepare(daemon_proc *d);
/* Starts viewlowerd --socket d->sock --log-level debug plus args (NULL-terminated, may be
 * NULL) and waits until the socket accepts connections. */
void daemon_start(daemon_proc *d, const char *const *args);
/* Forks and execs viewlowerd with exactly args (after argv[0]) and the extra environment
 * entries (NAME=VALUE, NULL-terminated), the fd listen_fd (if >= 0) moved to fd 3 and
 * LISTEN_PID set to the child's pid. Does not wait for anything. */
pid_t daemon_spawn(daemon_proc *d, const char *const *args, const char *const *env, int listen_fd);
/* HARNESS_WAIT_MS, or 8 times that when the daemon runs under valgrind (VL_IT_VALGRIND set):
 * the bound of the waits below and of client_open's requests. */
int daemon_wait_ms(void);
/* Waits until path accepts connections; fails the test (with the log) if d's process exits
 * or daemon_wait_ms() passes first. */
void daemon_wait_listening(const daemon_proc *d, const char *path);
/* Sends SIGTERM and returns the exit status (a SIGKILL after daemon_wait_ms() fails the test). */
int daemon_stop(daemon_proc *d);
/* Waits for the process to exit by itself; returns its exit status, or -1 on timeout. */
int daemon_wait(pid_t pid, int timeout_ms);
/* Removes the socket, the log and the directory. */
void daemon_cleanup(daemon_proc *d);
/* daemon_stop, the log printed when the exit status is not 0 (always with VL_IT_DUMP_LOG set
 * in the environment), then daemon_cleanup; returns the exit status (the end of every
 * fixture). */
int daemon_finish(daemon_proc *d);
/* A started daemon in a block of its own (prepare + start); daemon_delete finishes it, frees it
 * and asserts it exited 0. */
daemon_proc *daemon_new(const char *const *args);
void daemon_delete(daemon_proc *d);
/* main's exit status: 1 when cmocka counted failed tests or any daemon_finish saw a non-zero
 * exit status. cmocka does not count a failed group teardown, and group fixtures end their
 * daemon there, so every main returns harness_result(cmocka_run_group_tests(...)). */
int harness_result(int failed_tests);
/* Prints the daemon's log (on failures, for diagnosis). */
void daemon_dump_log(const daemon_proc *d);
/* Does the daemon's log contain text? */
bool daemon_log_contains(const daemon_proc *d, const char *text);
/* How many lines of the daemon's log contain text. */
int daemon_log_count(const daemon_proc *d, const char *text);
/* A value from /proc/PID/status ("VmRSS", "VmHWM"), in kB; -1 when absent. */
long proc_status_kb(pid_t pid, const char *field);

/* A connected client or fails the test. */
vl_client *client_open(const daemon_proc *d);
/* Connects to path, pings, closes; fails the test unless the ping succeeds. */
void ping_ok(const char *path);

/* Raw socket speaking frames (receive timeout HARNESS_WAIT_MS). */
int raw_connect(const char *path);
void raw_send(int fd, const void *p, size_t n);
/* Sends up to n bytes on the non-blocking fd until the peer stops reading for half a second;
 * returns how many went. */
size_t raw_send_until_stalled(int fd, const void *p, size_t n);
void raw_set_nonblocking(int fd);
void raw_send_frame(int fd, const char *json, const void *payload, size_t payload_len);
/* Receives one frame; returns the parsed JSON (caller deletes) and appends the payload. */
cJSON *raw_recv_frame(int fd, vl_buf *payload);
/* Receives one error response and checks its code, id (-1: null) and kind. */
void raw_expect_error(int fd, int code, int64_t id, const char *kind);
/* Asserts that the peer closes the connection within HARNESS_WAIT_MS. */
void raw_expect_closed(int fd);

/* Reads VL_EXAMPLES_DIR/graphs/<name> as JSON; fails the test when absent. */
cJSON *example_graph(const char *name);
/* A graph that keeps a worker busy for a while: relu, transpose, view_copy and mul over a
 * float32 [rows, cols] input. */
cJSON *heavy_graph(int rows, int cols);
/* Parses a JSON literal of the test; fails the test on error. */
cJSON *json(const char *text);
/* The number at a JSON pointer-ish dotted path ("report.replaced"), asserting it exists. */
double json_number(const cJSON *obj, const char *dotted);

uint64_t now_ms(void);
void sleep_ms(long ms);

#endif
