/* worker.c - `viewlowerctl worker`: Bazel's persistent-worker protocol, JSON flavour.
 *
 * Bazel writes WorkRequest objects to stdin ({"arguments": [...], "requestId": N, "inputs":
 * [...], ...}); Bazel 4 puts no delimiter between two of them (and its JSON printer may spread
 * one over several lines), so requests are cut from the byte stream by their JSON structure,
 * not by lines. Each gets exactly one WorkResponse line on stdout: {"exitCode": E, "output": "...", "requestId": N}.
 *
 * A request's arguments are a viewlowerctl command line (after --local), optionally led by
 * --graph-out FILE / --report-out FILE, which split a single-graph `lower` result into the
 * lowered graph and the report, byte for byte as the CLI prints them.
 *
 * Invariants:
 * - Every request runs in its own child, forked from the worker as it was before any request,
 *   through the CLI's own main with --local: a request sees no state of an earlier one, gives
 *   the bytes a one-shot run gives, and a crash fails that request, never the worker.
 * - The child's stdout and stderr go to temporary files; stdout of the worker carries responses
 *   only, each written whole by this single-threaded loop, so multiplexed answers never mix.
 * - Every input has a limit: request size, argument count, in-flight requests, output size. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/json_util.h"
#include "worker.h"

#define WORKER_MAX_REQUEST_BYTES ((size_t)4 << 20) /* one WorkRequest's JSON text */
#define WORKER_MAX_ARGS 4096                       /* arguments of one request */
#define WORKER_MAX_OUTPUT ((size_t)64 << 10)       /* bytes of each stream in "output" */
#define WORKER_MAX_INFLIGHT 16                     /* requests running at once */
#define WORKER_MAX_SPLIT_BYTES ((size_t)4 << 30)   /* a lower result the split reads back */
#define WORKER_MAX_NESTING 1024                    /* brackets checked; cJSON allows 1000 */
#define WORKER_READ_CHUNK 65536

enum { EXIT_INVALID = 2, EXIT_SERVER = 4, EXIT_USAGE = 64 };

/* Commands a request may run: those of the CLI that are pure functions of their files.
 * (stats belongs to a daemon; worker would recurse.) */
static const char *const request_commands[] = {"validate",  "lower", "explain", "verify", "run",
                                               "view-copy", "ping",  "version", NULL};

typedef struct {
  int64_t id;
  char **argv; /* {"viewlowerctl", "--local", command, ..., NULL}, owned */
  int argc;
  char *sandbox_dir;            /* NULL: the worker's directory */
  char *graph_out, *report_out; /* owned; NULL: that member is not written */
} request;

/* A running request. */
typedef struct {
  bool busy;
  pid_t pid;
  int done_fd; /* read end of a pipe whose write end only the child holds: EOF = it ended */
  FILE *out, *err;
  int64_t id;
} slot;

typedef struct {
  vl__ctl_main_fn run;
  slot slots[WORKER_MAX_INFLIGHT];
  size_t max_inflight, inflight;
  uint64_t served; /* requests started, for the log */
  /* the request being cut from stdin */
  char *buf;
  size_t len, depth, offset, start;
  size_t stray_first, stray_last; /* a run of bytes outside any request, when stray */
  bool stray, in_string, escape, too_long;
  char opened[WORKER_MAX_NESTING]; /* the brackets open at each depth, to catch a mismatch */
  int rc;                          /* the worker's own exit status */
  bool persistent; /* answers are WorkResponses on stdout; else (one-shot) text on stderr */
} worker;

/* ---- responses ---- */

/* Appends s[0..n) to out, each byte that is not part of valid UTF-8 (or is NUL) as '?', so
 * that the response is valid JSON text whatever a file name or message held. */
static size_t utf8_clean(char *out, const char *s, size_t n) {
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    unsigned char c = (unsigned char)s[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (c == 0 || len == 0 || i + len > n || !vl__utf8_valid(s + i, len)) {
      out[o++] = '?';
      i++;
      continue;
    }
    memcpy(out + o, s + i, len);
    o += len;
    i += len;
  }
  out[o] = '\0';
  return o;
}

/* One WorkResponse line on stdout. */
static void respond(worker *w, int64_t id, int exit_code, const char *output, size_t n) {
  if (!w->persistent) {
    fwrite(output, 1, n, stderr);
    return;
  }
  char *clean = malloc(n + 1);
  cJSON *r = cJSON_CreateObject();
  char *text = NULL;
  if (clean != NULL && r != NULL) {
    utf8_clean(clean, output, n);
    if (cJSON_AddNumberToObject(r, "exitCode", exit_code) &&
        cJSON_AddStringToObject(r, "output", clean) &&
        cJSON_AddNumberToObject(r, "requestId", (double)id)) {
      text = cJSON_PrintUnformatted(r);
    }
  }
  if (text == NULL) {
    /* Still one answer per request: a fixed text needs no allocation. */
    printf(
        "{\"exitCode\":%d,\"output\":\"viewlowerctl worker: out of memory\",\"requestId\":%" PRId64
        "}\n",
        EXIT_SERVER, id);
  } else {
    printf("%s\n", text);
  }
  if (fflush(stdout) != 0) {
    fprintf(stderr, "viewlowerctl worker: cannot write a response: %s\n", strerror(errno));
    w->rc = EXIT_SERVER;
  }
  free(text);
  cJSON_Delete(r);
  free(clean);
}

static void respond_error(worker *w, int64_t id, int exit_code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void respond_error(worker *w, int64_t id, int exit_code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(msg, sizeof msg - 1, fmt, ap);
  va_end(ap);
  size_t len = n < 0 ? 0 : (size_t)n < sizeof msg - 1 ? (size_t)n : sizeof msg - 2;
  msg[len++] = '\n';
  respond(w, id, exit_code, msg, len);
}

/* ---- requests ---- */

static void request_free(request *r) {
  for (int i = 0; r->argv != NULL && i < r->argc; i++) free(r->argv[i]);
  free(r->argv);
  free(r->sandbox_dir);
  free(r->graph_out);
  free(r->report_out);
  memset(r, 0, sizeof *r);
}

/* Writes msg for a request field: "viewlowerctl worker: request /arguments/2: ...". */
static int field_error(char *msg, size_t cap, const char *pointer, const char *what) {
  snprintf(msg, cap, "viewlowerctl worker: request %s: %s", pointer, what);
  return -1;
}

/* The one member named name (or alt), NULL when absent; *dup when it occurs twice. */
static const cJSON *member(const cJSON *obj, const char *name, const char *alt, bool *dup) {
  const cJSON *found = NULL;
  for (const cJSON *m = obj->child; m != NULL; m = m->next) {
    if (strcmp(m->string, name) != 0 && (alt == NULL || strcmp(m->string, alt) != 0)) continue;
    if (found != NULL) *dup = true;
    found = m;
  }
  return found;
}

static int parse_id(const cJSON *doc, int64_t *id, char *msg, size_t cap) {
  bool dup = false;
  const cJSON *v = member(doc, "requestId", "request_id", &dup);
  if (dup) return field_error(msg, cap, "/requestId", "given twice");
  if (v != NULL && !vl__json_int(v, 0, INT32_MAX, id)) {
    return field_error(msg, cap, "/requestId", "not a whole number in [0, 2^31-1]");
  }
  return 0;
}

/* Leading --graph-out / --report-out (their values' indices into *_at), then the command
 * (its index into *cmd_at), which must be one a request may run. */
static int check_arguments(const char *const *args, int n, int *cmd_at, int *graph_at,
                           int *report_at, char *msg, size_t cap) {
  char where[64];
  int i = 0;
  for (; i < n && args[i][0] == '-'; i += 2) {
    int *dest = strcmp(args[i], "--graph-out") == 0    ? graph_at
                : strcmp(args[i], "--report-out") == 0 ? report_at
                                                       : NULL;
    snprintf(where, sizeof where, "/arguments/%d", i);
    if (dest == NULL) {
      return field_error(msg, cap, where,
                         "only --graph-out and --report-out may come before the command; every "
                         "request runs in process (--local), so global options do not apply");
    }
    if (*dest >= 0) return field_error(msg, cap, where, "given twice");
    if (i + 1 >= n || args[i + 1][0] == '\0') {
      return field_error(msg, cap, where, "needs a file name");
    }
    *dest = i + 1;
  }
  snprintf(where, sizeof where, "/arguments/%d", i);
  if (i >= n) return field_error(msg, cap, "/arguments", "a command is required");
  bool known = false;
  for (size_t k = 0; request_commands[k] != NULL; k++) {
    known |= strcmp(args[i], request_commands[k]) == 0;
  }
  if (!known) {
    return field_error(msg, cap, where,
                       "not a command a request may run (validate, lower, explain, verify, run, "
                       "view-copy, ping, version)");
  }
  if ((*graph_at >= 0 || *report_at >= 0) && strcmp(args[i], "lower") != 0) {
    return field_error(msg, cap, where, "--graph-out and --report-out go with lower only");
  }
  for (int k = i + 1; k < n && (*graph_at >= 0 || *report_at >= 0); k++) {
    if (strcmp(args[k], "-o") == 0) {
      return field_error(msg, cap, "/arguments",
                         "-o and --graph-out/--report-out exclude each other");
    }
  }
  *cmd_at = i;
  return 0;
}

/* Turns a list of argument strings into r: argv = {"viewlowerctl", "--local", args[cmd..n)}
 * and the split files, all owned copies. */
static int request_from_args(request *r, const char *const *args, int n, char *msg, size_t cap) {
  int cmd_at = 0, graph_at = -1, report_at = -1;
  if (check_arguments(args, n, &cmd_at, &graph_at, &report_at, msg, cap) != 0) return -1;
  int argc = 2 + (n - cmd_at);
  r->argv = calloc((size_t)argc + 1, sizeof *r->argv);
  if (r->argv == NULL) return field_error(msg, cap, "", "out of memory");
  r->argc = argc;
  r->argv[0] = strdup("viewlowerctl");
  r->argv[1] = strdup("--local");
  bool ok = r->argv[0] && r->argv[1];
  for (int i = cmd_at; ok && i < n; i++) ok = (r->argv[2 + i - cmd_at] = strdup(args[i])) != NULL;
  if (ok && graph_at >= 0) ok = (r->graph_out = strdup(args[graph_at])) != NULL;
  if (ok && report_at >= 0) ok = (r->report_out = strdup(args[report_at])) != NULL;
  return ok ? 0 : field_error(msg, cap, "", "out of memory");
}

static int parse_fields(const cJSON *doc, request *r, char *msg, size_t cap) {
  if (!cJSON_IsObject(doc)) return field_error(msg, cap, "", "a WorkRequest is a JSON object");
  if (parse_id(doc, &r->id, msg, cap) != 0) return -1;
  bool dup = false;
  const cJSON *args = member(doc, "arguments", NULL, &dup);
  const cJSON *dir = member(doc, "sandboxDir", "sandbox_dir", &dup);
  if (dup) return field_error(msg, cap, "", "a field is given twice");
  if (args != NULL && !cJSON_IsArray(args)) {
    return field_error(msg, cap, "/arguments", "not an array of strings");
  }
  if (dir != NULL && (!cJSON_IsString(dir) || dir->valuestring[0] == '\0')) {
    return field_error(msg, cap, "/sandboxDir", "not a directory name");
  }
  int n = args ? cJSON_GetArraySize(args) : 0;
  if (n > WORKER_MAX_ARGS) return field_error(msg, cap, "/arguments", "more than 4096 arguments");
  const char **list = calloc((size_t)n + 1, sizeof *list);
  if (list == NULL) return field_error(msg, cap, "", "out of memory");
  int i = 0, rc = 0;
  for (const cJSON *a = args ? args->child : NULL; a != NULL; a = a->next, i++) {
    if (!cJSON_IsString(a)) {
      char where[64];
      snprintf(where, sizeof where, "/arguments/%d", i);
      rc = field_error(msg, cap, where, "not a string");
      break;
    }
    list[i] = a->valuestring;
  }
  if (rc == 0 && request_from_args(r, list, n, msg, cap) != 0) rc = -2; /* a usage error */
  free(list);
  if (rc == 0 && dir != NULL && (r->sandbox_dir = strdup(dir->valuestring)) == NULL) {
    rc = field_error(msg, cap, "", "out of memory");
  }
  return rc;
}

/* The arguments of a parsed WorkRequest (an object); 0, or the exit code of the refusal with
 * msg: 2 for a malformed WorkRequest, 64 for arguments that are not a command line it runs. */
static int parse_request(const cJSON *doc, request *r, char *msg, size_t cap) {
  int rc = parse_fields(doc, r, msg, cap);
  return rc == 0 ? 0 : rc < -1 ? EXIT_USAGE : EXIT_INVALID;
}
/* ---- the child: one request ---- */

/* The [start, end) of the value of top-level key name in an object printed by cJSON. */
typedef struct {
  size_t start, end;
} span;

static size_t skip_ws(const char *t, size_t n, size_t i) {
  while (i < n && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) i++;
  return i;
}

static size_t skip_string(const char *t, size_t n, size_t i) {
  for (i++; i < n && t[i] != '"'; i++) {
    if (t[i] == '\\') i++;
  }
  return i < n ? i + 1 : n;
}

static size_t skip_value(const char *t, size_t n, size_t i) {
  if (i < n && t[i] == '"') return skip_string(t, n, i);
  size_t depth = 0;
  for (; i < n; i++) {
    char c = t[i];
    if (c == '"') {
      i = skip_string(t, n, i) - 1;
    } else if (c == '{' || c == '[') {
      depth++;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return i;
      if (--depth == 0) return i + 1;
    } else if (depth == 0 && (c == ',' || c == ' ' || c == '\n')) {
      return i;
    }
  }
  return n;
}

/* Finds the "graph" and "report" members of the lower result text; false if it is not one. */
static bool lower_spans(const char *t, size_t n, span *graph, span *report) {
  size_t i = skip_ws(t, n, 0);
  bool have_graph = false, have_report = false;
  if (i >= n || t[i++] != '{') return false;
  for (;;) {
    i = skip_ws(t, n, i);
    if (i >= n || t[i] != '"') return false;
    size_t key = i + 1, key_end = skip_string(t, n, i) - 1;
    i = skip_ws(t, n, key_end + 1);
    if (i >= n || t[i++] != ':') return false;
    i = skip_ws(t, n, i);
    span v = {i, skip_value(t, n, i)};
    if (v.end <= v.start) return false;
    if (key_end - key == 5 && memcmp(t + key, "graph", 5) == 0) *graph = v, have_graph = true;
    if (key_end - key == 6 && memcmp(t + key, "report", 6) == 0) *report = v, have_report = true;
    i = skip_ws(t, n, v.end);
    if (i < n && t[i] == ',') {
      i++;
      continue;
    }
    /* One object, nothing after it: several graphs' results, one per line, are not one. */
    return i < n && t[i] == '}' && skip_ws(t, n, i + 1) == n && have_graph && have_report;
  }
}

static bool write_span(const char *path, const char *t, span s) {
  FILE *f = fopen(path, "wb");
  if (f == NULL) {
    fprintf(stderr, "viewlowerctl: %s: cannot write: %s\n", path, strerror(errno));
    return false;
  }
  bool ok = fwrite(t + s.start, 1, s.end - s.start, f) == s.end - s.start && fputc('\n', f) != EOF;
  ok = fclose(f) == 0 && ok;
  if (!ok) fprintf(stderr, "viewlowerctl: %s: write failed\n", path);
  return ok;
}

/* After a successful lower: reads the result back from fd 1 (a temporary file), writes its two
 * members to the split files and empties fd 1. Returns the child's exit code. */
static int split_lower_result(const request *r) {
  struct stat sb;
  if (fstat(1, &sb) != 0 || sb.st_size < 0 || (uint64_t)sb.st_size > WORKER_MAX_SPLIT_BYTES) {
    fprintf(stderr, "viewlowerctl worker: cannot read the lower result back\n");
    return EXIT_SERVER;
  }
  size_t n = (size_t)sb.st_size, got = 0;
  char *t = malloc(n + 1);
  while (t != NULL && got < n) {
    ssize_t k = pread(1, t + got, n - got, (off_t)got);
    if (k <= 0) break;
    got += (size_t)k;
  }
  span graph, report;
  int rc = 0;
  if (t == NULL || got != n || !lower_spans(t, n, &graph, &report)) {
    fprintf(stderr, "viewlowerctl worker: --graph-out and --report-out take the result of "
                    "lowering exactly one graph\n");
    rc = EXIT_USAGE;
  } else if ((r->graph_out && !write_span(r->graph_out, t, graph)) ||
             (r->report_out && !write_span(r->report_out, t, report))) {
    rc = EXIT_INVALID; /* as the CLI's own -o: a file that cannot be written */
  }
  free(t);
  if (ftruncate(1, 0) != 0) rc = EXIT_SERVER;
  return rc;
}

/* In the child: stdin from /dev/null, stdout/stderr to out/err (-1: keep), run the CLI. */
static void child_run(const worker *w, const request *r, int out, int err) {
  int null = open("/dev/null", O_RDONLY);
  if (null < 0 || dup2(null, 0) < 0 || (out >= 0 && dup2(out, 1) < 0) ||
      (err >= 0 && dup2(err, 2) < 0)) {
    _exit(EXIT_SERVER);
  }
  if (r->sandbox_dir != NULL && chdir(r->sandbox_dir) != 0) {
    fprintf(stderr, "viewlowerctl worker: sandbox directory %s: %s\n", r->sandbox_dir,
            strerror(errno));
    fflush(stderr);
    _exit(EXIT_INVALID);
  }
  int rc = w->run(r->argc, r->argv);
  if (fflush(stdout) != 0 && rc == 0) rc = EXIT_INVALID;
  if (rc == 0 && (r->graph_out || r->report_out)) rc = split_lower_result(r);
  fflush(NULL);
  _exit(rc);
}

/* ---- the parent: starting and finishing requests ---- */

/* Exit code and a note for how the child ended. */
static int child_status(int status, char *note, size_t cap) {
  note[0] = '\0';
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  snprintf(note, cap, "viewlowerctl worker: the request's process ended on signal %d\n",
           WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return EXIT_SERVER;
}

/* Appends up to WORKER_MAX_OUTPUT bytes of f to buf[*len..]. */
static void append_captured(FILE *f, char *buf, size_t *len) {
  if (f == NULL || fseek(f, 0, SEEK_END) != 0) return;
  long size = ftell(f);
  if (size <= 0 || fseek(f, 0, SEEK_SET) != 0) return;
  size_t want = (size_t)size < WORKER_MAX_OUTPUT ? (size_t)size : WORKER_MAX_OUTPUT;
  *len += fread(buf + *len, 1, want, f);
  if ((size_t)size > want) {
    *len += (size_t)snprintf(buf + *len, 128, "\n[output cut at %zu of %ld bytes]\n", want, size);
  }
}

static void slot_release(slot *s) {
  if (s->out) fclose(s->out);
  if (s->err) fclose(s->err);
  if (s->done_fd >= 0) close(s->done_fd);
  memset(s, 0, sizeof *s);
  s->done_fd = -1;
}

/* Waits for the child of s and answers its request: stderr, then stdout, as the output. */
static void slot_finish(worker *w, slot *s) {
  int status = 0;
  while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR) {
  }
  char note[128];
  int code = child_status(status, note, sizeof note);
  size_t cap = 2 * (WORKER_MAX_OUTPUT + 128) + sizeof note, len = 0;
  char *buf = malloc(cap);
  if (buf == NULL) {
    respond_error(w, s->id, EXIT_SERVER, "viewlowerctl worker: out of memory");
  } else {
    append_captured(s->err, buf, &len);
    append_captured(s->out, buf, &len);
    memcpy(buf + len, note, strlen(note));
    len += strlen(note);
    respond(w, s->id, code, buf, len);
  }
  free(buf);
  slot_release(s);
  w->inflight--;
}

/* Polls the running requests (and stdin when watch_stdin) until something happens; finishes
 * each request whose child ended. Returns true when stdin is readable. */
static bool wait_events(worker *w, bool watch_stdin) {
  struct pollfd fds[WORKER_MAX_INFLIGHT + 1];
  size_t map[WORKER_MAX_INFLIGHT + 1], n = 0;
  if (watch_stdin) fds[n++] = (struct pollfd){.fd = 0, .events = POLLIN};
  for (size_t i = 0; i < WORKER_MAX_INFLIGHT; i++) {
    if (w->slots[i].busy) {
      map[n] = i;
      fds[n++] = (struct pollfd){.fd = w->slots[i].done_fd, .events = POLLIN};
    }
  }
  if (n == 0) return false;
  if (poll(fds, (nfds_t)n, -1) < 0) return watch_stdin && errno != EINTR; /* read() tells */
  size_t first = watch_stdin ? 1 : 0;
  for (size_t k = first; k < n; k++) {
    if (fds[k].revents) slot_finish(w, &w->slots[map[k]]);
  }
  return watch_stdin && fds[0].revents != 0;
}

/* Forks the child for r in a free slot (waiting for one if all are busy). capture: send the
 * child's stdout and stderr to temporary files; otherwise it keeps the worker's (one-shot);
 * a split always captures stdout. Returns the slot, or NULL (answered) when it cannot start. */
static slot *request_start(worker *w, const request *r, bool capture) {
  /* Request id 0 is singleplex: its answer cannot be told from another's, so such requests
   * run one at a time, answered in the order they came. */
  size_t limit = r->id == 0 ? 1 : w->max_inflight;
  while (w->inflight >= limit) wait_events(w, false);
  slot *s = NULL;
  for (size_t i = 0; s == NULL && i < WORKER_MAX_INFLIGHT; i++) {
    if (!w->slots[i].busy) s = &w->slots[i];
  }
  int pipefd[2] = {-1, -1};
  bool split = r->graph_out || r->report_out;
  s->out = capture || split ? tmpfile() : NULL;
  s->err = capture ? tmpfile() : NULL;
  if (((capture || split) && s->out == NULL) || (capture && s->err == NULL) || pipe(pipefd) != 0) {
    respond_error(w, r->id, EXIT_SERVER, "viewlowerctl worker: cannot start the request: %s",
                  strerror(errno));
    slot_release(s);
    return NULL;
  }
  fflush(NULL); /* nothing buffered is written twice */
  pid_t pid = fork();
  if (pid == 0) {
    close(pipefd[0]);
    child_run(w, r, s->out ? fileno(s->out) : -1, s->err ? fileno(s->err) : -1);
  }
  close(pipefd[1]);
  s->done_fd = pipefd[0];
  if (pid < 0) {
    respond_error(w, r->id, EXIT_SERVER, "viewlowerctl worker: fork: %s", strerror(errno));
    slot_release(s);
    return NULL;
  }
  s->busy = true;
  s->pid = pid;
  s->id = r->id;
  w->inflight++;
  return s;
}

/* ---- cutting requests from stdin ---- */

/* Answers a request the stream could not start. A singleplex one (id 0) waits for those
 * before it, so that answers keep the order of the requests. */
static void answer_refused(worker *w, int64_t id, int exit_code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void answer_refused(worker *w, int64_t id, int exit_code, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  while (id == 0 && w->inflight > 0) wait_events(w, false);
  respond_error(w, id, exit_code, "%s", msg);
}

static void handle_request(worker *w, const char *text, size_t len) {
  cJSON *doc = NULL;
  size_t at = 0;
  char msg[512];
  request r;
  memset(&r, 0, sizeof r);
  if (vl__json_parse_one(text, len, false, &doc, &at) != VL__JSON_OK) {
    const char *why = vl__json_malformed_reason(text, len, at);
    answer_refused(w, 0, EXIT_INVALID,
                   "viewlowerctl worker: malformed WorkRequest at byte %zu of standard input "
                   "(JSON, RFC 8259)%s%s",
                   w->start + at, why[0] != '\0' ? ": " : "", why);
    return;
  }
  const cJSON *cancel =
      cJSON_IsObject(doc) ? cJSON_GetObjectItemCaseSensitive(doc, "cancel") : NULL;
  if (cJSON_IsTrue(cancel)) {
    /* Cancellation is not offered (no supports-worker-cancellation); a cancel request needs no
     * answer of its own, and the request it names is answered when it ends. */
    cJSON_Delete(doc);
    return;
  }
  int refused = parse_request(doc, &r, msg, sizeof msg);
  if (refused != 0) {
    int64_t id = r.id;
    request_free(&r);
    cJSON_Delete(doc);
    answer_refused(w, id, refused, "%s", msg);
    return;
  }
  /* One line per request on stderr, which Bazel keeps in the worker's log file (never in an
   * action's output): which process served what. (Bazel 4 sends no verbosity field.) */
  fprintf(stderr, "viewlowerctl worker (pid %ld): request %" PRIu64 " (id %" PRId64 "): %s%s%s\n",
          (long)getpid(), w->served + 1, r.id, r.argv[2], r.argc > 3 ? " " : "",
          r.argc > 3 ? r.argv[3] : "");
  cJSON_Delete(doc);
  if (request_start(w, &r, true) != NULL) w->served++;
  request_free(&r);
}

/* Reports a run of bytes between requests that cannot start one. */
static void flush_stray(worker *w) {
  if (!w->stray) return;
  fprintf(stderr,
          "viewlowerctl worker: bytes %zu to %zu of standard input are not a JSON WorkRequest "
          "(does the action set requires-worker-protocol: json?)\n",
          w->stray_first, w->stray_last);
  answer_refused(w, 0, EXIT_INVALID,
                 "viewlowerctl worker: bytes %zu to %zu of standard input are not a JSON "
                 "WorkRequest object",
                 w->stray_first, w->stray_last);
  w->stray = false;
}

/* Between requests: skips whitespace, starts a request at '{', counts anything else stray.
 * Returns true when c starts a request. */
static bool feed_between(worker *w, char c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return false;
  if (c != '{') {
    if (!w->stray) w->stray_first = w->offset;
    w->stray = true;
    w->stray_last = w->offset;
    return false;
  }
  flush_stray(w);
  w->len = 0;
  w->start = w->offset;
  w->too_long = w->in_string = w->escape = false;
  return true;
}

/* The request ends at its closing bracket, or early at a bracket that does not match. */
static void request_end(worker *w, bool mismatch) {
  w->depth = 0;
  if (mismatch) {
    answer_refused(w, 0, EXIT_INVALID,
                   "viewlowerctl worker: malformed WorkRequest at byte %zu of standard input: "
                   "a bracket that does not match",
                   w->offset);
  } else if (w->too_long) {
    answer_refused(w, 0, EXIT_INVALID,
                   "viewlowerctl worker: the WorkRequest at byte %zu of standard input is larger "
                   "than %zu bytes",
                   w->start, WORKER_MAX_REQUEST_BYTES);
  } else {
    handle_request(w, w->buf, w->len);
  }
}

/* Takes one byte of the stream: between requests, inside one, or inside an over-long one.
 * Only strings and brackets matter for where a request ends; the JSON reader judges the rest. */
static void feed_byte(worker *w, char c) {
  if (w->depth == 0 && !feed_between(w, c)) return;
  if (!w->too_long) {
    if (w->len < WORKER_MAX_REQUEST_BYTES) {
      w->buf[w->len++] = c;
    } else {
      w->too_long = true;
    }
  }
  if (w->in_string) {
    if (w->escape) {
      w->escape = false;
    } else if (c == '\\') {
      w->escape = true;
    } else if (c == '"') {
      w->in_string = false;
    }
  } else if (c == '"') {
    w->in_string = true;
  } else if (c == '{' || c == '[') {
    if (w->depth < WORKER_MAX_NESTING) w->opened[w->depth] = c;
    w->depth++;
  } else if (c == '}' || c == ']') {
    w->depth--;
    bool mismatch = w->depth < WORKER_MAX_NESTING && w->opened[w->depth] != (c == '}' ? '{' : '[');
    if (mismatch || w->depth == 0) request_end(w, mismatch);
  }
}

static int serve(worker *w) {
  char chunk[WORKER_READ_CHUNK];
  w->buf = malloc(WORKER_MAX_REQUEST_BYTES);
  if (w->buf == NULL) {
    fprintf(stderr, "viewlowerctl worker: out of memory\n");
    return EXIT_SERVER;
  }
  for (;;) {
    if (!wait_events(w, true)) continue;
    ssize_t n = read(0, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; i++, w->offset++) feed_byte(w, chunk[i]);
  }
  flush_stray(w);
  if (w->depth != 0) {
    fprintf(stderr,
            "viewlowerctl worker: standard input ended inside a WorkRequest (at byte %zu)\n",
            w->offset);
    w->rc = EXIT_INVALID;
  }
  while (w->inflight > 0) wait_events(w, false);
  free(w->buf);
  return w->rc;
}

/* ---- one-shot: @FILE ---- */

static int run_flagfile(worker *w, const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "viewlowerctl worker: %s: cannot open: %s\n", path, strerror(errno));
    return EXIT_INVALID;
  }
  char *text = malloc(WORKER_MAX_REQUEST_BYTES + 1);
  size_t n = text ? fread(text, 1, WORKER_MAX_REQUEST_BYTES + 1, f) : 0;
  fclose(f);
  if (text == NULL || n > WORKER_MAX_REQUEST_BYTES || memchr(text, '\0', n) != NULL) {
    fprintf(stderr, "viewlowerctl worker: %s: not an arguments file (text, at most %zu bytes)\n",
            path, WORKER_MAX_REQUEST_BYTES);
    free(text);
    return EXIT_INVALID;
  }
  /* One argument per line; the newline after the last one is optional. */
  const char **args = calloc(WORKER_MAX_ARGS + 1, sizeof *args);
  int argc = 0, rc = 0;
  text[n] = '\0';
  for (char *p = text; args != NULL && p < text + n && rc == 0;) {
    char *nl = memchr(p, '\n', (size_t)(text + n - p));
    if (nl != NULL) *nl = '\0';
    if (argc >= WORKER_MAX_ARGS) {
      rc = -1;
    } else {
      args[argc++] = p;
    }
    p = nl ? nl + 1 : text + n;
  }
  request r;
  memset(&r, 0, sizeof r);
  char msg[512] = "viewlowerctl worker: more than 4096 arguments";
  if (args == NULL) snprintf(msg, sizeof msg, "viewlowerctl worker: out of memory");
  if (args != NULL && rc == 0) rc = request_from_args(&r, args, argc, msg, sizeof msg);
  if (args == NULL || rc != 0) {
    fprintf(stderr, "%s (arguments file %s)\n", msg, path);
    rc = args == NULL ? EXIT_SERVER : EXIT_USAGE;
  } else {
    slot *s = request_start(w, &r, false);
    rc = EXIT_SERVER;
    if (s != NULL) {
      int status = 0;
      char note[128];
      while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR) {
      }
      rc = child_status(status, note, sizeof note);
      fputs(note, stderr);
      slot_release(s);
    }
  }
  request_free(&r);
  free(args);
  free(text);
  return rc;
}

int vl__ctl_worker(int argc, char **argv, vl__ctl_main_fn run) {
  static worker w; /* large (its slots): off the stack; one per process */
  memset(&w, 0, sizeof w);
  w.run = run;
  for (size_t i = 0; i < WORKER_MAX_INFLIGHT; i++) w.slots[i].done_fd = -1;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  w.max_inflight = cpus < 1 ? 1 : cpus > WORKER_MAX_INFLIGHT ? WORKER_MAX_INFLIGHT : (size_t)cpus;
  signal(SIGPIPE, SIG_IGN); /* a closed stdout is a write error, reported, not a silent death */
  w.persistent = argc == 1 && strcmp(argv[0], "--persistent_worker") == 0;
  if (w.persistent) return serve(&w);
  if (argc == 1 && argv[0][0] == '@' && argv[0][1] != '\0') return run_flagfile(&w, argv[0] + 1);
  if (argc == 1 && strncmp(argv[0], "--flagfile=", 11) == 0 && argv[0][11] != '\0') {
    return run_flagfile(&w, argv[0] + 11);
  }
  fprintf(stderr, "viewlowerctl: worker takes --persistent_worker, or @FILE (the arguments of one "
                  "request, one per line) (see viewlowerctl --help)\n");
  return EXIT_USAGE;
}
