/* viewlowerctl.c - the command-line tool (viewlowerctl(1)): a subcommand table over one transport.
 * The transport is either the daemon (libviewlower-client) or, with --local, the core's
 * vl_service_call in process: both get the same params and print the same results and
 * errors. Over the socket, tensors travel as raw payload ("blob") and are re-encoded here. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/json_read.h"
#include "base/json_util.h"
#include "base/json_write.h"
#include "ctl_explain.h"
#include "ctl_help.h"
#include "ctl_metrics.h"
#include "viewlower/client.h"
#include "viewlower/lower.h"
#include "viewlower/service.h"
#include "viewlower/tensor_json.h"
#include "worker.h"

enum {
  EXIT_MISMATCH = 1,
  EXIT_INVALID = 2,
  EXIT_UNREACHABLE = 3,
  EXIT_SERVER = 4,
  EXIT_USAGE = 64
};
#define MAX_FILE_BYTES ((size_t)4 << 30)
#define MAX_POSITIONAL 4096
/* Entries a --size / --out-dim-order list may have. More than VL_MAX_RANK is passed on, so that
 * a rank above 16 is a kernel error (exit 2; docs/protocol.md, "Methods") in both modes, not a
 * usage error. */
#define MAX_LIST 1024
#define DEFAULT_TIMEOUT_MS 120000
#define STR_(x) #x
#define STR(x) STR_(x)
/* The socket viewlowerd.socket creates; a user who is not root falls back to it. */
#define SYSTEM_SOCKET "/run/viewlower/viewlower.sock"

typedef struct {
  const char *socket;
  bool local;
  int timeout_ms;
  vl_client *client;
  vl_limits lim;
  /* per command */
  const char *positional[MAX_POSITIONAL];
  size_t n_positional;
  const char *out, *inputs, *seed, *size, *out_dim_order, *policy, *encoding, *format;
  const char *plan_alignment;
  bool keep_view_copy, no_fold, no_param_layouts, plan;
  vl__ctl_format fmt;
  const char *explain_format, *explain_only;
  vl__explain_format xfmt;
  vl__explain_only only;
  /* flag values, checked before any file is read */
  uint64_t seed_value;
  int64_t size_v[MAX_LIST], order_v[MAX_LIST];
  size_t rank, order_rank;
  vl_encoding enc;
} ctl;

static void usage(FILE *f) {
  fputs("usage: viewlowerctl [--socket PATH | --local] [--timeout-ms N] COMMAND ...\n"
        "       viewlowerctl COMMAND --help | --help | --version\n"
        "  validate GRAPH\n"
        "  lower GRAPH... [-o OUT] [LOWER OPTIONS]\n"
        "  explain GRAPH [LOWER OPTIONS] [--format text|json|dot]\n"
        "                [--only replaced|kept|merged|removed|relaid]\n"
        "  verify GRAPH [--inputs FILE] [--seed N] [LOWER OPTIONS]\n"
        "    (LOWER OPTIONS: --keep-view-copy --no-fold --no-param-layouts --plan\n"
        "     --plan-alignment N --policy safe|legacy)\n"
        "  run GRAPH --inputs FILE [-o OUT] [--encoding values|base64]\n"
        "  view-copy TENSOR --size 1,2,-1 [--out-dim-order 0,1,2] [-o OUT] [--encoding "
        "values|base64]\n"
        "  ping | stats [--format json|openmetrics|prometheus] | version\n"
        "  worker --persistent_worker | @ARGSFILE   Bazel's JSON persistent worker: each request\n"
        "      runs one command above in process (docs/build-systems.md)\n"
        "GRAPH, TENSOR and FILE may be - for standard input.\n"
        "  --socket PATH   the daemon's socket (default: $VIEWLOWER_SOCKET; as root\n"
        "                  " SYSTEM_SOCKET "; else $XDG_RUNTIME_DIR/viewlower.sock,\n"
        "                  then " SYSTEM_SOCKET ")\n"
        "  --local         run the library in this process, no daemon\n"
        "  --timeout-ms N  bound of the connect and of each request (default " STR(DEFAULT_TIMEOUT_MS) "; 0: none)\n"
        "Exit: 0 ok, 1 verify mismatch, 2 invalid input, 3 daemon unreachable or protocol error,\n"
        "      4 server-side failure, 64 usage error.\n",
        f);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "viewlowerctl: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (see viewlowerctl --help)\n");
  va_end(ap);
  return EXIT_USAGE;
}

static int exit_code(vl_status s) {
  switch (s) {
  case VL_OK: return 0;
  case VL_ERR_PARSE:
  case VL_ERR_INVALID_PARAMS:
  case VL_ERR_INVALID_GRAPH:
  case VL_ERR_INVALID_TENSOR:
  case VL_ERR_KERNEL:
  case VL_ERR_UNSUPPORTED:
  case VL_ERR_TOO_LARGE: return EXIT_INVALID;
  case VL_ERR_IO:
  case VL_ERR_TIMEOUT:
  case VL_ERR_PROTOCOL:
  case VL_ERR_INVALID_REQUEST:
  case VL_ERR_UNKNOWN_METHOD:
  case VL_ERR_NOT_PERMITTED: return EXIT_UNREACHABLE;
  default: return EXIT_SERVER;
  }
}

/* What to do about a refusal: the socket's mode kept us out (EACCES on connect) or the daemon
 * did not admit our credentials (-32006). Both are fixed by the group the units admit. */
static const char *access_hint(const vl_error *err) {
  bool eacces = err->code == VL_ERR_IO && strstr(err->message, strerror(EACCES)) != NULL;
  if (err->code != VL_ERR_NOT_PERMITTED && !eacces) return "";
  return " (join the group viewlower: sudo usermod -aG viewlower $USER, then log in again; "
         "see /usr/share/doc/viewlower/deployment.md)";
}

/* Prints the one error line. A params pointer is made relative to the file it came from; one
 * under a flag's key (/out_dim_order/2) names the flag, with the rest of the pointer (/2). */
static int report(const char *file, const vl_error *err) {
  static const struct {
    const char *prefix, *flag;
  } files[] = {{"/graph", NULL}, {"/inputs", NULL}, {"/input", NULL}},
    flags[] = {{"/size", "--size"},
               {"/out_dim_order", "--out-dim-order"},
               {"/seed", "--seed"},
               {"/options/policy", "--policy"},
               {"/encoding", "--encoding"}};
  const char *path = err->path;
  const char *where = file;
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    size_t n = strlen(files[i].prefix);
    if (strncmp(path, files[i].prefix, n) == 0 && (path[n] == '/' || path[n] == '\0')) {
      path += n;
      break;
    }
  }
  for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
    size_t n = strlen(flags[i].prefix);
    if (strncmp(err->path, flags[i].prefix, n) == 0 &&
        (err->path[n] == '/' || err->path[n] == '\0')) {
      where = flags[i].flag;
      path = err->path + n;
    }
  }
  fprintf(stderr, "viewlowerctl: %s%s%s%s%s%s\n", where ? where : "", where ? ": " : "", path,
          path[0] ? ": " : "", err->message[0] ? err->message : vl_status_text(err->code),
          access_hint(err));
  return exit_code(err->code);
}

/* A file's bytes, NUL-terminated, at most MAX_FILE_BYTES of them. A regular file is measured
 * first: one over the bound is refused before any of it is read (reading a sparse 4 GiB + 1 file
 * to refuse it took 21 s and 4.2 GB), and the buffer is sized to it at once. A pipe or device
 * is read until the bound. */
static char *read_file(const char *path, size_t *len, vl_error *err) {
  FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
  if (f == NULL) {
    vl_error_set(err, VL_ERR_INVALID_PARAMS, "", "cannot open: %s", strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode)) {
    if ((uint64_t)st.st_size > MAX_FILE_BYTES) {
      if (f != stdin) fclose(f);
      vl_error_set(err, VL_ERR_TOO_LARGE, "", "file is larger than %zu bytes", MAX_FILE_BYTES);
      return NULL;
    }
    if ((size_t)st.st_size + 2 > cap) cap = (size_t)st.st_size + 2; /* all of it, EOF, NUL */
  }
  char *buf = malloc(cap);
  while (buf != NULL) {
    n += fread(buf + n, 1, cap - n - 1, f);
    if (n < cap - 1) break;
    if (cap >= MAX_FILE_BYTES) {
      free(buf);
      buf = NULL;
      vl_error_set(err, VL_ERR_TOO_LARGE, "", "file is larger than %zu bytes", MAX_FILE_BYTES);
      break;
    }
    char *bigger = realloc(buf, cap * 2);
    if (bigger == NULL) free(buf);
    buf = bigger;
    cap *= 2;
  }
  if (buf == NULL && err->code == VL_OK) vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  if (buf != NULL && ferror(f)) {
    free(buf);
    buf = NULL;
    vl_error_set(err, VL_ERR_INVALID_PARAMS, "", "read error: %s", strerror(errno));
  }
  if (f != stdin) fclose(f);
  if (buf != NULL) buf[n] = '\0';
  *len = n;
  return buf;
}

/* text[0..len) as one JSON value, held to RFC 8259 (cJSON would also cut a string at \u0000);
 * a refused text gets the message that names the problem and its byte. */
static cJSON *parse_json(const char *text, size_t len, vl_error *err) {
  size_t at = 0;
  cJSON *doc = NULL;
  switch (vl__json_parse_one(text, len, false, &doc, &at)) {
  case VL__JSON_NUL_ESCAPE:
    vl_error_set(err, VL_ERR_PARSE, "", "malformed JSON at byte %zu: \\u0000 is not allowed", at);
    break;
  case VL__JSON_MALFORMED: {
    const char *why = vl__json_malformed_reason(text, len, at);
    vl_error_set(err, VL_ERR_PARSE, "", "malformed JSON at byte %zu%s%s", at,
                 why[0] != '\0' ? ": " : "", why);
    break;
  }
  case VL__JSON_CONTROL:
    vl_error_set(err, VL_ERR_PARSE, "", "malformed JSON at byte %zu: control character 0x%02x", at,
                 (unsigned)(unsigned char)text[at]);
    break;
  case VL__JSON_TRAILING:
    vl_error_set(err, VL_ERR_PARSE, "", "malformed JSON at byte %zu: text after the JSON value",
                 at);
    break;
  case VL__JSON_NOMEM: vl_error_set(err, VL_ERR_NOMEM, "", "out of memory"); break;
  case VL__JSON_OK: break;
  }
  return doc;
}

/* path's text as one JSON value: a tree, or with raw a raw item that takes the text when it
 * is one JSON value (any other text is parsed, so that its error is worded as before). */
static cJSON *read_json_as(const char *path, bool raw, vl_error *err) {
  size_t len;
  vl_error_clear(err);
  char *text = read_file(path, &len, err);
  if (text == NULL) return NULL;
  if (raw && vl__json_is_one_value(text, len)) {
    cJSON *item = vl__json_raw_take(text); /* no copy */
    if (item == NULL) vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
    return item;
  }
  cJSON *doc = parse_json(text, len, err);
  free(text);
  return doc;
}

static cJSON *read_json(const char *path, vl_error *err) {
  return read_json_as(path, false, err);
}

/* A GRAPH file, as its text in a raw item when it is one JSON value: the core's graph parser
 * reads it without a tree (service.h), in process and in the daemon (the request writer copies
 * a raw item verbatim), and gives it the result and errors its tree would get; a tree of the
 * file costs ~15 times its size (a 14 MB graph of 100,000 nodes peaked at 217 MB of RSS). */
static cJSON *read_graph(const char *path, vl_error *err) {
  return read_json_as(path, true, err);
}

/* ---- transport ---- */

/* A user who is not root, and named no socket (--socket, $VIEWLOWER_SOCKET), has the per-user
 * socket in $XDG_RUNTIME_DIR tried first and the system one of viewlowerd.socket after it. */
static bool may_fall_back(const ctl *c) {
  const char *env = getenv("VIEWLOWER_SOCKET");
  return c->socket == NULL && (env == NULL || env[0] == '\0') && geteuid() != 0;
}

/* Connects to the default socket, else (see may_fall_back) to SYSTEM_SOCKET; when both fail,
 * the error names both. A timeout is not a reason to try another daemon. */
static vl_status connect_default(ctl *c, vl_error *err) {
  vl_status st = vl_client_connect(c->socket, c->timeout_ms, &c->client, err);
  if (st == VL_OK || st == VL_ERR_TIMEOUT || !may_fall_back(c)) return st;
  char first[VL_ERROR_MESSAGE_MAX];
  memcpy(first, err->message, sizeof first);
  vl_error second;
  if (vl_client_connect(SYSTEM_SOCKET, c->timeout_ms, &c->client, &second) == VL_OK) return VL_OK;
  return vl_error_set(err, VL_ERR_IO, "", "%.240s; %.240s", first, second.message);
}

static vl_status connect_daemon(ctl *c, vl_error *err) {
  if (c->client != NULL) return VL_OK;
  vl_status st = connect_default(c, err);
  /* No socket path, or one too long for a Unix socket: the daemon is out of reach (exit 3),
   * not an input error. */
  if (st == VL_ERR_INVALID_PARAMS) {
    char why[VL_ERROR_MESSAGE_MAX];
    memcpy(why, err->message, sizeof why);
    st = vl_error_set(err, VL_ERR_IO, "", "cannot reach the daemon: %s", why);
  }
  return st;
}

static vl_status call(ctl *c, const char *method, const cJSON *params, const vl_buf *payload,
                      cJSON **result, vl_buf *out_payload, vl_error *err) {
  const uint8_t *p = payload ? payload->data : NULL;
  size_t n = payload ? payload->len : 0;
  vl_error_clear(err);
  if (c->local) {
    return vl_service_call(method, params, p, n, &c->lim, result, out_payload, NULL, err);
  }
  vl_status st = connect_daemon(c, err);
  if (st != VL_OK) return st;
  return vl_client_call(c->client, method, params, p, n, result, out_payload, err);
}

/* A result kept as the daemon's text (a raw item: printed as it came, never a tree; a lowered
 * graph's tree costs ~15 times its text), or with key only that member's text. */
static vl_status result_as_raw(char *text, size_t len, const char *key, cJSON **result,
                               vl_error *err) {
  size_t off = 0, n = len;
  if (text == NULL) {
    return vl_error_set(err, VL_ERR_PROTOCOL, "", "the daemon's answer has no result");
  }
  if (key != NULL && !vl__json_member_span(text, len, key, &off, &n)) {
    free(text);
    return vl_error_set(err, VL_ERR_PROTOCOL, "", "the daemon's result has no \"%s\"", key);
  }
  memmove(text, text + off, n);
  text[n] = '\0';
  if ((*result = vl__json_raw_take(text)) == NULL) {
    free(text);
    return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  }
  return VL_OK;
}

/* A request answered by a result that is only printed: over the socket received as text
 * (result_as_raw); in process the service's tree, which holds the graph as a raw item already.
 * With key, only that member of the result. */
static vl_status call_for_print(ctl *c, const char *method, const cJSON *params, const char *key,
                                cJSON **result, vl_error *err) {
  *result = NULL;
  if (c->local) {
    cJSON *whole = NULL;
    vl_status st = call(c, method, params, NULL, &whole, NULL, err);
    if (st != VL_OK || key == NULL) {
      *result = whole;
      return st;
    }
    *result = cJSON_DetachItemFromObjectCaseSensitive(whole, key);
    cJSON_Delete(whole);
    return *result != NULL ? VL_OK
                           : vl_error_set(err, VL_ERR_PROTOCOL, "", "the result has no \"%s\"", key);
  }
  vl_error_clear(err);
  vl_status st = connect_daemon(c, err);
  char *text = NULL;
  size_t len = 0;
  if (st == VL_OK) st = vl_client_call_text(c->client, method, params, NULL, 0, &text, &len, NULL, err);
  return st != VL_OK ? st : result_as_raw(text, len, key, result, err);
}

/* Puts json where item is in parent (keeping item's key) and frees item. */
static bool replace_item(cJSON *parent, cJSON *item, cJSON *json) {
  if (json == NULL) return false;
  if (item->string != NULL && (json->string = strdup(item->string)) == NULL) return false;
  return cJSON_ReplaceItemViaPointer(parent, item, json);
}

/* Turns a blob output (a child of parent) back into the encoding the user asked for. */
static vl_status tensor_from_transport(ctl *c, cJSON *parent, cJSON *item, const vl_buf *payload,
                                       vl_encoding enc, vl_error *err) {
  if (c->local) return VL_OK;
  vl_tensor *t = NULL;
  vl_status st = vl_tensor_from_json(item, payload->data, payload->len, NULL, &t, err);
  if (st != VL_OK) {
    return vl_error_set(err, VL_ERR_PROTOCOL, "", "bad tensor from the daemon: %.200s",
                        err->message);
  }
  /* The same bound --local applies, so both modes answer alike. */
  if ((st = vl_tensor_encoding_check(t, enc, &c->lim, err)) != VL_OK) {
    vl_tensor_free(t);
    return st;
  }
  cJSON *json = vl_tensor_to_json(t, enc, NULL);
  vl_tensor_free(t);
  if (!replace_item(parent, item, json)) {
    cJSON_Delete(json);
    return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  }
  return VL_OK;
}

/* A tensor as a blob reference into payload; NULL when it does not convert. */
static cJSON *blob_json(ctl *c, const cJSON *tensor, vl_buf *payload) {
  vl_tensor *t = NULL;
  vl_error ignored;
  if (vl_tensor_from_json(tensor, NULL, 0, &c->lim, &t, &ignored) != VL_OK) return NULL;
  cJSON *blob = vl_tensor_to_json(t, VL_ENCODING_BLOB, payload);
  vl_tensor_free(t);
  return blob;
}

/* Over the socket the tensors of params[key] (one tensor, or with map an object of them) go
 * as blobs in the payload; in process they stay as read. If any does not convert, all stay as
 * read and go with no payload: the daemon then finds the error exactly where, and in the
 * order, --local does (graph first), so both modes print the same line. */
static void tensors_for_transport(ctl *c, cJSON *params, const char *key, bool map,
                                  vl_buf *payload) {
  cJSON *item = cJSON_GetObjectItemCaseSensitive(params, key), *wire = NULL;
  if (c->local || item == NULL) return;
  bool ok;
  if (!map) {
    ok = (wire = blob_json(c, item, payload)) != NULL;
  } else {
    ok = cJSON_IsObject(item) && (wire = cJSON_CreateObject()) != NULL;
    for (const cJSON *t = ok ? item->child : NULL; ok && t != NULL; t = t->next) {
      cJSON *blob = blob_json(c, t, payload);
      ok = blob != NULL && cJSON_AddItemToObject(wire, t->string, blob);
      if (!ok) cJSON_Delete(blob);
    }
  }
  if (ok) ok = cJSON_ReplaceItemInObjectCaseSensitive(params, key, wire);
  if (!ok) {
    cJSON_Delete(wire);
    vl_buf_free(payload);
  }
}

/* ---- output ---- */

static int write_json(const char *out, const cJSON *json) {
  char *text = vl__json_print(json, NULL); /* keeps the digits of exact numbers */
  if (text == NULL) {
    fprintf(stderr, "viewlowerctl: out of memory\n");
    return EXIT_SERVER;
  }
  FILE *f = out && strcmp(out, "-") != 0 ? fopen(out, "w") : stdout;
  if (f == NULL) {
    fprintf(stderr, "viewlowerctl: %s: cannot write: %s\n", out, strerror(errno));
    free(text);
    return EXIT_INVALID;
  }
  fprintf(f, "%s\n", text);
  int rc = (f != stdout ? fclose(f) : fflush(f)) == 0 ? 0 : EXIT_INVALID;
  if (rc != 0) fprintf(stderr, "viewlowerctl: %s: write failed\n", out ? out : "stdout");
  free(text);
  return rc;
}

static cJSON *options_json(const ctl *c) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL) return NULL;
  if (c->keep_view_copy) cJSON_AddFalseToObject(o, "remove_view_copy");
  if (c->no_fold) cJSON_AddFalseToObject(o, "fold");
  if (c->no_param_layouts) cJSON_AddFalseToObject(o, "param_layouts");
  if (c->plan) cJSON_AddTrueToObject(o, "plan");
  if (c->plan_alignment) cJSON_AddNumberToObject(o, "plan_alignment", atof(c->plan_alignment));
  if (c->policy) cJSON_AddStringToObject(o, "policy", c->policy);
  return o;
}

/* Builds {"graph": <file>, extra...}; takes no ownership of extra. */
static cJSON *graph_params(ctl *c, const char *file, bool with_options, vl_error *err) {
  cJSON *graph = read_graph(file, err);
  if (graph == NULL) return NULL;
  cJSON *params = cJSON_CreateObject();
  if (params == NULL || !cJSON_AddItemToObject(params, "graph", graph)) {
    cJSON_Delete(graph);
    cJSON_Delete(params);
    vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
    return NULL;
  }
  if (with_options && !cJSON_AddItemToObject(params, "options", options_json(c))) {
    cJSON_Delete(params);
    vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
    return NULL;
  }
  return params;
}

/* ---- commands ---- */

static int simple_graph_command(ctl *c, const char *method, bool with_options, const char *key) {
  vl_error err;
  cJSON *params = graph_params(c, c->positional[0], with_options, &err), *result = NULL;
  if (params == NULL) return report(c->positional[0], &err);
  vl_status st = call_for_print(c, method, params, key, &result, &err);
  cJSON_Delete(params);
  if (st != VL_OK) return report(c->positional[0], &err);
  int rc = write_json(c->out, result);
  cJSON_Delete(result);
  return rc;
}

static int cmd_validate(ctl *c) {
  return simple_graph_command(c, "validate", false, "graph");
}

/* The table's width: the terminal's when stdout is one, else $COLUMNS, else 80. */
static int output_width(void) {
  struct winsize ws;
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    return ws.ws_col;
  }
  const char *cols = getenv("COLUMNS");
  char *end;
  long n = cols ? strtol(cols, &end, 10) : 0;
  return cols && *end == '\0' && n >= 20 && n <= 1000 ? (int)n : 80;
}

static int cmd_explain(ctl *c) {
  vl_error err;
  cJSON *params = graph_params(c, c->positional[0], true, &err), *result = NULL;
  if (params == NULL) return report(c->positional[0], &err);
  vl_status st = call(c, "lower", params, NULL, &result, NULL, &err);
  char missing[VL_ERROR_PATH_MAX];
  vl__explain_opts opts = {c->xfmt, c->only, output_width()};
  bool ok = st == VL_OK &&
            vl__ctl_print_explain(stdout, cJSON_GetObjectItemCaseSensitive(params, "graph"),
                                  result, &opts, missing, sizeof missing);
  cJSON_Delete(params);
  cJSON_Delete(result);
  if (st != VL_OK) return report(c->positional[0], &err);
  if (!ok) {
    fprintf(stderr, "viewlowerctl: the lower result has no %s\n", missing);
    return EXIT_UNREACHABLE; /* a protocol error: the daemon's answer breaks the protocol */
  }
  return fflush(stdout) == 0 ? 0 : EXIT_INVALID;
}

/* ---- lower with several graphs ----
 * Every input gets exactly one outcome, kept until all are in: its result, or its error (also
 * printed on stderr as it happens). They are then written in input order: with -o, result i to
 * OUT/<file name of input i> (an input that failed has a stale file of that name removed);
 * without, one line per input on stdout, {"error": {...}} for a failed one. */

typedef struct {
  cJSON *result; /* NULL unless lowered */
  vl_error err;  /* why not */
  int code;      /* exit code of this input: 0 when lowered */
} outcome;

/* The file name a result is written under in the -o directory. */
static const char *out_name(const char *input) {
  if (strcmp(input, "-") == 0) return "stdin.json";
  const char *slash = strrchr(input, '/');
  return slash ? slash + 1 : input;
}

typedef struct {
  const char *name;
  size_t index;
} named;

static int cmp_named(const void *a, const void *b) {
  const named *x = a, *y = b;
  int r = strcmp(x->name, y->name);
  return r != 0 ? r : (x->index > y->index) - (x->index < y->index);
}

/* Two inputs whose results would land on one file are a usage error, found before any work. */
static int check_out_names(const ctl *c) {
  size_t n = c->n_positional;
  named *v = malloc(n * sizeof *v);
  if (v == NULL) return usage_error("out of memory");
  for (size_t i = 0; i < n; i++) v[i] = (named){out_name(c->positional[i]), i};
  qsort(v, n, sizeof *v, cmp_named);
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    if (v[i].name[0] == '\0') {
      rc = usage_error("-o %s: %s names no file", c->out, c->positional[v[i].index]);
    } else if (i > 0 && strcmp(v[i - 1].name, v[i].name) == 0) {
      rc = usage_error("-o %s: %s and %s would both be written to %s/%s", c->out,
                       c->positional[v[i - 1].index], c->positional[v[i].index], c->out,
                       v[i].name);
    }
  }
  free(v);
  return rc;
}

static void progress(size_t done, size_t total) {
  if (isatty(STDERR_FILENO)) {
    fprintf(stderr, "\rlowered %zu/%zu%s", done, total, done == total ? "\n" : "");
  }
}

static int worst(int a, int b) {
  return a > b ? a : b;
}

/* Records input i's outcome; an error is reported on stderr now. */
static void settle(ctl *c, outcome *o, size_t i, vl_status st, cJSON *result, const vl_error *err) {
  if (st == VL_OK) {
    o[i].result = result;
    return;
  }
  cJSON_Delete(result);
  o[i].err = *err;
  o[i].code = report(c->positional[i], err);
}

/* In process: one graph after another. */
static void lower_many_local(ctl *c, outcome *o) {
  for (size_t i = 0; i < c->n_positional; i++) {
    vl_error err;
    cJSON *params = graph_params(c, c->positional[i], true, &err), *result = NULL;
    vl_status st = params ? call(c, "lower", params, NULL, &result, NULL, &err) : err.code;
    cJSON_Delete(params);
    settle(c, o, i, st, result, &err);
    progress(i + 1, c->n_positional);
  }
}

/* A transport failure ends the batch: it is reported once, and every input not yet answered
 * gets it as its outcome. */
static void fail_unanswered(ctl *c, outcome *o, const bool *answered, const vl_error *err) {
  int code = report(NULL, err);
  for (size_t i = 0; i < c->n_positional; i++) {
    if (!answered[i]) {
      o[i].err = *err;
      o[i].code = code;
    }
  }
}

/* Over the socket: pipelined on one connection, a bounded window of requests in flight; corked,
 * so the requests sent before each receive go out in one write (a graph over 64 KiB alone). */
static void lower_many_remote(ctl *c, outcome *o, bool *answered) {
  enum { WINDOW = 8 };
  vl_error err;
  if (connect_daemon(c, &err) != VL_OK || vl_client_cork(c->client, true, &err) != VL_OK) {
    fail_unanswered(c, o, answered, &err);
    return;
  }
  size_t sent = 0, done = 0, inflight = 0;
  while (done < c->n_positional) {
    while (sent < c->n_positional && inflight < WINDOW) {
      cJSON *params = graph_params(c, c->positional[sent], true, &err);
      vl_status st =
          params ? vl_client_send(c->client, sent, "lower", params, NULL, 0, &err) : err.code;
      cJSON_Delete(params);
      if (vl_client_is_transport_error(st)) {
        fail_unanswered(c, o, answered, &err);
        return;
      }
      if (st != VL_OK) {
        settle(c, o, sent, st, NULL, &err);
        answered[sent] = true;
        done++;
      } else {
        inflight++;
      }
      sent++;
    }
    if (inflight == 0) continue;
    uint64_t id = VL_CLIENT_NO_ID;
    cJSON *result = NULL;
    char *text = NULL;
    size_t len = 0;
    vl_status st = vl_client_recv_text(c->client, &id, &text, &len, NULL, &err);
    if (st == VL_OK) st = result_as_raw(text, len, NULL, &result, &err); /* kept as its text */
    if (vl_client_is_transport_error(st) || id >= c->n_positional || answered[id]) {
      cJSON_Delete(result);
      if (!vl_client_is_transport_error(st)) {
        vl_error_set(&err, VL_ERR_PROTOCOL, "", "the daemon answered an unknown request id");
      }
      fail_unanswered(c, o, answered, &err);
      return;
    }
    inflight--;
    done++;
    answered[id] = true;
    settle(c, o, id, st, result, &err);
    progress(done, c->n_positional);
  }
}

/* {"error": {"input", "code", "kind", "path", "message"}}: a failed input's stdout line. The
 * path is relative to the input file, as on the stderr line. */
static cJSON *error_line(const char *input, const vl_error *err) {
  const char *path = err->path;
  if (strncmp(path, "/graph", 6) == 0 && (path[6] == '/' || path[6] == '\0')) path += 6;
  cJSON *line = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(line, "error");
  bool ok = e != NULL && cJSON_AddStringToObject(e, "input", input) &&
            cJSON_AddNumberToObject(e, "code", vl_status_rpc_code(err->code)) &&
            cJSON_AddStringToObject(e, "kind", vl_status_kind(err->code)) &&
            cJSON_AddStringToObject(e, "path", path) &&
            cJSON_AddStringToObject(e, "message",
                                    err->message[0] ? err->message : vl_status_text(err->code));
  if (!ok) {
    cJSON_Delete(line);
    return NULL;
  }
  return line;
}

/* Writes result i into the -o directory (dfd) without following links: the text goes to a new
 * temporary file (O_CREAT | O_EXCL | O_NOFOLLOW, relative to the directory), then is renamed
 * over the result's name, so a symbolic link (or anything else) planted at that name or at the
 * temporary name is never written through. A name that is already a link is refused. */
static int write_in_dir(int dfd, const char *dir, const char *name, const cJSON *result) {
  struct stat st;
  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
    fprintf(stderr, "viewlowerctl: %s/%s is a symbolic link: not writing through it\n", dir,
            name);
    return EXIT_INVALID;
  }
  char *text = vl__json_print(result, NULL);
  if (text == NULL) {
    fprintf(stderr, "viewlowerctl: out of memory\n");
    return EXIT_SERVER;
  }
  char tmp[4096];
  int fd = -1;
  for (unsigned k = 0; fd < 0 && k < 100; k++) {
    snprintf(tmp, sizeof tmp, ".%s.%ld.%u.tmp", name, (long)getpid(), k);
    fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    fprintf(stderr, "viewlowerctl: %s/%s: cannot create: %s\n", dir, tmp, strerror(errno));
    free(text);
    return EXIT_INVALID;
  }
  size_t len = strlen(text), off = 0;
  text[len++] = '\n'; /* the NUL's place: write() needs no terminator */
  while (off < len) {
    ssize_t w = write(fd, text + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += (size_t)w;
  }
  free(text);
  int rc = off == len && close(fd) == 0 ? 0 : EXIT_INVALID;
  if (off != len) close(fd);
  if (rc == 0 && renameat(dfd, tmp, dfd, name) != 0) rc = EXIT_INVALID;
  if (rc != 0) {
    fprintf(stderr, "viewlowerctl: %s/%s: write failed: %s\n", dir, name, strerror(errno));
    unlinkat(dfd, tmp, 0);
  }
  return rc;
}

static int write_outcome(ctl *c, int dfd, size_t i, const outcome *o) {
  if (c->out == NULL) {
    cJSON *line = o->code == 0 ? NULL : error_line(c->positional[i], &o->err);
    int rc = write_json(NULL, o->code == 0 ? o->result : line);
    cJSON_Delete(line);
    return rc;
  }
  const char *name = out_name(c->positional[i]);
  if (o->code == 0) return write_in_dir(dfd, c->out, name, o->result);
  /* a failed input: a stale result of that name is removed (a link itself, never its target) */
  struct stat st;
  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
    fprintf(stderr, "viewlowerctl: %s/%s is a symbolic link: not removing it\n", c->out, name);
    return EXIT_INVALID;
  }
  if (unlinkat(dfd, name, 0) != 0 && errno != ENOENT) {
    fprintf(stderr, "viewlowerctl: %s/%s: cannot remove the stale result: %s\n", c->out, name,
            strerror(errno));
    return EXIT_INVALID;
  }
  return 0;
}

static int lower_many(ctl *c) {
  size_t n = c->n_positional;
  outcome *o = calloc(n, sizeof *o);
  bool *answered = calloc(n, sizeof *answered);
  if (o == NULL || answered == NULL) {
    free(o);
    free(answered);
    fprintf(stderr, "viewlowerctl: out of memory\n");
    return EXIT_SERVER;
  }
  if (c->local) {
    lower_many_local(c, o);
  } else {
    lower_many_remote(c, o, answered);
  }
  int rc = 0, dfd = -1;
  if (c->out != NULL && (dfd = open(c->out, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
    fprintf(stderr, "viewlowerctl: -o %s: cannot open the directory: %s\n", c->out,
            strerror(errno));
    rc = EXIT_INVALID;
  }
  for (size_t i = 0; i < n; i++) {
    rc = worst(rc, worst(o[i].code, c->out == NULL || dfd >= 0 ? write_outcome(c, dfd, i, &o[i])
                                                               : EXIT_INVALID));
    cJSON_Delete(o[i].result);
  }
  if (dfd >= 0) close(dfd);
  free(o);
  free(answered);
  return rc;
}

static int cmd_lower(ctl *c) {
  if (c->n_positional == 1) return simple_graph_command(c, "lower", true, NULL);
  if (c->out != NULL) {
    struct stat sb;
    int rc = check_out_names(c);
    if (rc != 0) return rc;
    if (stat(c->out, &sb) != 0 && mkdir(c->out, 0777) != 0) {
      return usage_error("-o %s: cannot create the directory", c->out);
    }
    if (stat(c->out, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
      return usage_error("-o %s: with several graphs -o names a directory", c->out);
    }
  }
  return lower_many(c);
}

/* Adds the inputs file to params (as blobs over the socket). An error in reading it is
 * put under /inputs, so that it names the inputs file. */
static vl_status add_inputs(ctl *c, cJSON *params, vl_buf *payload, vl_error *err) {
  if (c->inputs == NULL) return VL_OK;
  cJSON *inputs = read_json(c->inputs, err);
  if (inputs == NULL) {
    vl_error_prefix(err, "/inputs");
    return err->code;
  }
  if (!cJSON_AddItemToObject(params, "inputs", inputs)) {
    cJSON_Delete(inputs);
    return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  }
  tensors_for_transport(c, params, "inputs", true, payload);
  return VL_OK;
}

/* Which file an error belongs to: the inputs file for /inputs pointers, else the graph. */
static const char *error_file(const ctl *c, const vl_error *err, const char *graph) {
  return strncmp(err->path, "/inputs", 7) == 0 && c->inputs ? c->inputs : graph;
}

static int cmd_verify(ctl *c) {
  vl_error err;
  vl_buf payload = {0};
  cJSON *params = graph_params(c, c->positional[0], true, &err), *result = NULL;
  if (params == NULL) return report(c->positional[0], &err);
  vl_status st = add_inputs(c, params, &payload, &err);
  if (st == VL_OK && c->seed != NULL &&
      !cJSON_AddNumberToObject(params, "seed", (double)c->seed_value)) {
    st = vl_error_set(&err, VL_ERR_NOMEM, "", "out of memory");
  }
  if (st == VL_OK) st = call(c, "verify", params, &payload, &result, NULL, &err);
  cJSON_Delete(params);
  vl_buf_free(&payload);
  if (st != VL_OK) return report(error_file(c, &err, c->positional[0]), &err);
  int rc = write_json(c->out, result);
  if (rc == 0 && !cJSON_IsTrue(cJSON_GetObjectItem(result, "equal"))) rc = EXIT_MISMATCH;
  cJSON_Delete(result);
  return rc;
}

/* Re-encodes each tensor of list (a JSON array) from the transport form. */
static vl_status outputs_from_transport(ctl *c, cJSON *list, const vl_buf *payload, vl_encoding enc,
                                        vl_error *err) {
  cJSON *next;
  for (cJSON *t = list ? list->child : NULL; t != NULL; t = next) {
    next = t->next;
    vl_status st = tensor_from_transport(c, list, t, payload, enc, err);
    if (st != VL_OK) return st;
  }
  return VL_OK;
}

/* The encoding asked of the service: the user's in process, blob over the socket. */
static const char *wire_encoding(const ctl *c) {
  return c->local ? (c->encoding ? c->encoding : "values") : "blob";
}

static int cmd_run(ctl *c) {
  vl_error err;
  vl_buf payload = {0}, out_payload = {0};
  cJSON *params = graph_params(c, c->positional[0], false, &err), *result = NULL;
  if (params == NULL) return report(c->positional[0], &err);
  vl_status st = add_inputs(c, params, &payload, &err);
  if (st == VL_OK && !cJSON_AddStringToObject(params, "encoding", wire_encoding(c))) {
    st = vl_error_set(&err, VL_ERR_NOMEM, "", "out of memory");
  }
  if (st == VL_OK) st = call(c, "execute", params, &payload, &result, &out_payload, &err);
  cJSON_Delete(params);
  vl_buf_free(&payload);
  if (st == VL_OK) {
    st = outputs_from_transport(c, cJSON_GetObjectItem(result, "outputs"), &out_payload, c->enc,
                                &err);
  }
  vl_buf_free(&out_payload);
  if (st != VL_OK) {
    cJSON_Delete(result);
    return report(error_file(c, &err, c->positional[0]), &err);
  }
  int rc = write_json(c->out, result);
  cJSON_Delete(result);
  return rc;
}

/* The list as JSON whose numbers keep their digits (vl__json_parse_one): through a double,
 * 9007199254740993 would reach the service as 2^53, a size nobody gave; with its digits the
 * service refuses it, at /size/k, in both modes. */
static cJSON *int_list_json(const int64_t *v, size_t n) {
  char text[MAX_LIST * 22 + 3];
  size_t len = 0;
  text[len++] = '[';
  for (size_t i = 0; i < n; i++) {
    len += (size_t)snprintf(text + len, sizeof text - len, "%s%lld", i > 0 ? "," : "",
                            (long long)v[i]);
  }
  text[len++] = ']';
  cJSON *arr = NULL;
  size_t at = 0;
  return vl__json_parse_one(text, len, false, &arr, &at) == VL__JSON_OK ? arr : NULL;
}

/* {"input": <file>, "size", "out_dim_order"?, "encoding"}; NULL on out of memory. */
static cJSON *view_copy_params(ctl *c, cJSON *input) {
  cJSON *params = cJSON_CreateObject();
  if (params == NULL || !cJSON_AddItemToObject(params, "input", input)) {
    cJSON_Delete(input);
    cJSON_Delete(params);
    return NULL;
  }
  bool ok = cJSON_AddItemToObject(params, "size", int_list_json(c->size_v, c->rank));
  if (ok && c->out_dim_order) {
    ok = cJSON_AddItemToObject(params, "out_dim_order", int_list_json(c->order_v, c->order_rank));
  }
  if (ok) ok = cJSON_AddStringToObject(params, "encoding", wire_encoding(c)) != NULL;
  if (!ok) {
    cJSON_Delete(params);
    return NULL;
  }
  return params;
}

static int cmd_view_copy(ctl *c) {
  vl_error err;
  vl_buf payload = {0}, out_payload = {0};
  cJSON *input = read_json(c->positional[0], &err), *result = NULL;
  if (input == NULL) return report(c->positional[0], &err);
  cJSON *params = view_copy_params(c, input);
  vl_status st = VL_OK;
  if (params == NULL) st = vl_error_set(&err, VL_ERR_NOMEM, "", "out of memory");
  if (st == VL_OK) {
    tensors_for_transport(c, params, "input", false, &payload);
    st = call(c, "view_copy", params, &payload, &result, &out_payload, &err);
  }
  cJSON_Delete(params);
  vl_buf_free(&payload);
  if (st == VL_OK) {
    st = tensor_from_transport(c, result, cJSON_GetObjectItem(result, "output"), &out_payload,
                               c->enc, &err);
  }
  vl_buf_free(&out_payload);
  if (st != VL_OK) {
    cJSON_Delete(result);
    return report(c->positional[0], &err);
  }
  int rc = write_json(c->out, cJSON_GetObjectItem(result, "output"));
  cJSON_Delete(result);
  return rc;
}

static int cmd_plain(ctl *c, const char *method) {
  vl_error err;
  cJSON *result = NULL;
  if (c->local && strcmp(method, "stats") == 0) {
    return usage_error("stats: counters belong to the daemon; not available with --local");
  }
  vl_status st = call(c, method, NULL, NULL, &result, NULL, &err);
  if (st != VL_OK) return report(NULL, &err);
  int rc = write_json(c->out, result);
  cJSON_Delete(result);
  return rc;
}

static int cmd_ping(ctl *c) {
  return cmd_plain(c, "ping");
}
/* stats as JSON, or as metrics text for a scraper (ctl_metrics.c). */
static int cmd_stats(ctl *c) {
  if (c->fmt == VL__CTL_FORMAT_JSON) return cmd_plain(c, "stats");
  vl_error err;
  cJSON *result = NULL;
  if (c->local) {
    return usage_error("stats: counters belong to the daemon; not available with --local");
  }
  if (call(c, "stats", NULL, NULL, &result, NULL, &err) != VL_OK) return report(NULL, &err);
  vl__ctl_print_metrics(stdout, result, c->fmt);
  cJSON_Delete(result);
  return fflush(stdout) == 0 ? 0 : EXIT_INVALID;
}
static int cmd_version(ctl *c) {
  return cmd_plain(c, "version");
}

/* ---- argument parsing: a table of commands, each with its options ----
 * Every flag is checked as it is parsed, before any file is read: a usage error (64) comes
 * first in both modes. Files are then read and parsed in argument order (graph, inputs), and
 * the rest is checked by the service, in process or in the daemon, in one order. */

enum {
  OPT_OUT = 1 << 0,
  OPT_KEEP = 1 << 1,
  OPT_POLICY = 1 << 2,
  OPT_INPUTS = 1 << 3,
  OPT_SEED = 1 << 4,
  OPT_ENCODING = 1 << 5,
  OPT_SIZE = 1 << 6,
  OPT_ORDER = 1 << 7,
  OPT_FORMAT = 1 << 8,
  OPT_NOFOLD = 1 << 9,
  OPT_NOPARAMS = 1 << 10,
  OPT_PLAN = 1 << 11,
  OPT_PLAN_ALIGN = 1 << 12,
  OPT_EXPLAIN_FORMAT = 1 << 13,
  OPT_ONLY = 1 << 14,
  /* the lowering options of lower, explain and verify */
  OPT_LOWER = OPT_KEEP | OPT_NOFOLD | OPT_POLICY | OPT_NOPARAMS | OPT_PLAN | OPT_PLAN_ALIGN
};

static const struct command {
  const char *name;
  int (*fn)(ctl *);
  size_t min_args, max_args;
  unsigned options, required;
} commands[] = {
    {"validate", cmd_validate, 1, 1, 0, 0},
    {"lower", cmd_lower, 1, MAX_POSITIONAL, OPT_OUT | OPT_LOWER, 0},
    {"explain", cmd_explain, 1, 1, OPT_LOWER | OPT_EXPLAIN_FORMAT | OPT_ONLY, 0},
    {"verify", cmd_verify, 1, 1, OPT_INPUTS | OPT_SEED | OPT_LOWER, 0},
    {"run", cmd_run, 1, 1, OPT_INPUTS | OPT_OUT | OPT_ENCODING, OPT_INPUTS},
    {"view-copy", cmd_view_copy, 1, 1, OPT_SIZE | OPT_ORDER | OPT_OUT | OPT_ENCODING, OPT_SIZE},
    {"ping", cmd_ping, 0, 0, 0, 0},
    {"stats", cmd_stats, 0, 0, OPT_FORMAT, 0},
    {"version", cmd_version, 0, 0, 0, 0},
};

/* "1,2,-1" -> v[0..n); "" is rank 0. */
static bool parse_list(const char *text, int64_t *v, size_t *n) {
  *n = 0;
  if (text[0] == '\0') return true;
  const char *p = text;
  for (;;) {
    char *end;
    errno = 0;
    long long x = strtoll(p, &end, 10);
    if (end == p || errno || *n >= MAX_LIST) return false;
    v[(*n)++] = x;
    if (*end == '\0') return true;
    if (*end != ',') return false;
    p = end + 1;
  }
}

static bool check_policy(ctl *c, const char *v) {
  (void)c;
  return strcmp(v, "safe") == 0 || strcmp(v, "legacy") == 0;
}

static bool check_seed(ctl *c, const char *v) {
  char *end;
  errno = 0;
  c->seed_value = strtoull(v, &end, 10);
  return !errno && *end == '\0' && v[0] != '-' && v[0] != '\0' && c->seed_value <= (1ull << 53);
}

static bool check_encoding(ctl *c, const char *v) {
  return vl_encoding_from_name(v, &c->enc) && c->enc != VL_ENCODING_BLOB;
}

static bool check_format(ctl *c, const char *v) {
  return vl__ctl_format_from_name(v, &c->fmt);
}

static bool check_explain_format(ctl *c, const char *v) {
  return vl__ctl_explain_format_from_name(v, &c->xfmt);
}

static bool check_only(ctl *c, const char *v) {
  return vl__ctl_explain_only_from_name(v, &c->only);
}

static bool check_size(ctl *c, const char *v) {
  return parse_list(v, c->size_v, &c->rank);
}

static bool check_order(ctl *c, const char *v) {
  return parse_list(v, c->order_v, &c->order_rank);
}

static bool check_alignment(ctl *c, const char *v) {
  (void)c;
  char *end;
  errno = 0;
  long long a = strtoll(v, &end, 10);
  return errno == 0 && end != v && *end == '\0' && a >= 1 && a <= VL_PLAN_MAX_ALIGNMENT &&
         (a & (a - 1)) == 0;
}

static const struct option_row {
  const char *flag;
  unsigned bit;
  size_t offset; /* of the const char * field in ctl, or of the bool a switch sets */
  bool (*check)(ctl *, const char *value); /* NULL: any value */
  const char *hint;                        /* the usage error when check fails */
  bool is_switch;                          /* takes no value: sets a bool */
} option_rows[] = {
    {"-o", OPT_OUT, offsetof(ctl, out), NULL, NULL, false},
    {"--policy", OPT_POLICY, offsetof(ctl, policy), check_policy, "use safe or legacy", false},
    {"--inputs", OPT_INPUTS, offsetof(ctl, inputs), NULL, NULL, false},
    {"--seed", OPT_SEED, offsetof(ctl, seed), check_seed, "not a whole number in [0, 2^53]",
     false},
    {"--encoding", OPT_ENCODING, offsetof(ctl, encoding), check_encoding, "use values or base64",
     false},
    {"--size", OPT_SIZE, offsetof(ctl, size), check_size, "not a comma list of integers", false},
    {"--out-dim-order", OPT_ORDER, offsetof(ctl, out_dim_order), check_order,
     "not a comma list of integers", false},
    {"--format", OPT_FORMAT, offsetof(ctl, format), check_format,
     "use json, openmetrics or prometheus", false},
    {"--format", OPT_EXPLAIN_FORMAT, offsetof(ctl, explain_format), check_explain_format,
     "use text, json or dot", false},
    {"--only", OPT_ONLY, offsetof(ctl, explain_only), check_only,
     "use replaced, kept, merged, removed or relaid", false},
    {"--plan-alignment", OPT_PLAN_ALIGN, offsetof(ctl, plan_alignment), check_alignment,
     "not a power of two from 1 to 1073741824", false},
    {"--keep-view-copy", OPT_KEEP, offsetof(ctl, keep_view_copy), NULL, NULL, true},
    {"--no-fold", OPT_NOFOLD, offsetof(ctl, no_fold), NULL, NULL, true},
    {"--no-param-layouts", OPT_NOPARAMS, offsetof(ctl, no_param_layouts), NULL, NULL, true},
    {"--plan", OPT_PLAN, offsetof(ctl, plan), NULL, NULL, true},
};

static const struct option_row *find_option(const struct command *cmd, const char *flag) {
  for (size_t k = 0; k < sizeof option_rows / sizeof *option_rows; k++) {
    if (strcmp(option_rows[k].flag, flag) == 0 && (cmd->options & option_rows[k].bit)) {
      return &option_rows[k];
    }
  }
  return NULL;
}

/* parse_command_args' answer when it printed the command's help: exit 0, run nothing. */
enum { HELP_SHOWN = -1 };

/* "--name=value" (as viewlowerd takes its flags): the flag's name into name (NUL-terminated;
 * false when it does not fit) and its value; an argument without '=' is its own name, with no
 * value. */
static bool split_flag(const char *a, char *name, size_t cap, const char **value) {
  const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
  size_t len = eq != NULL ? (size_t)(eq - a) : strlen(a);
  *value = eq != NULL ? eq + 1 : NULL;
  if (len >= cap) return false;
  memcpy(name, a, len);
  name[len] = '\0';
  return true;
}

static int parse_command_args(ctl *c, const struct command *cmd, int argc, char **argv) {
  unsigned seen = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      if (!vl__ctl_help(stdout, cmd->name)) usage(stdout);
      return HELP_SHOWN;
    }
    if (a[0] != '-' || strcmp(a, "-") == 0) {
      if (c->n_positional >= cmd->max_args) return usage_error("unexpected argument %s", a);
      c->positional[c->n_positional++] = a;
      continue;
    }
    char flag[32];
    const char *value = NULL;
    const struct option_row *row =
        split_flag(a, flag, sizeof flag, &value) ? find_option(cmd, flag) : NULL;
    if (row == NULL) return usage_error("unknown option %s for this command", a);
    seen |= row->bit;
    if (row->is_switch) {
      if (value != NULL) return usage_error("%s takes no value", flag);
      *(bool *)((char *)c + row->offset) = true;
      continue;
    }
    if (value == NULL && i + 1 >= argc) return usage_error("%s needs a value", a);
    if (value == NULL) value = argv[++i];
    if (row->check && !row->check(c, value)) {
      return usage_error("%s %s: %s", flag, value, row->hint);
    }
    *(const char **)((char *)c + row->offset) = value;
  }
  if (c->n_positional < cmd->min_args) return usage_error("%s needs more arguments", cmd->name);
  for (size_t k = 0; k < sizeof option_rows / sizeof *option_rows; k++) {
    if ((cmd->required & option_rows[k].bit) && !(seen & option_rows[k].bit)) {
      return usage_error("%s needs %s", cmd->name, option_rows[k].flag);
    }
  }
  return 0;
}

static bool parse_int(const char *s, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || end == s || v < 0 || v > 86400000) return false;
  *out = (int)v;
  return true;
}

int main(int argc, char **argv) {
  ctl c;
  memset(&c, 0, sizeof c);
  vl_limits_default(&c.lim);
  c.timeout_ms = DEFAULT_TIMEOUT_MS;
  c.enc = VL_ENCODING_VALUES;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; i++) {
    char flag[32];
    const char *value = NULL;
    bool valued = split_flag(argv[i], flag, sizeof flag, &value) &&
                  (strcmp(flag, "--socket") == 0 || strcmp(flag, "--timeout-ms") == 0);
    if (valued && value == NULL && i + 1 < argc) value = argv[++i];
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(argv[i], "--version") == 0) {
      printf("viewlowerctl %s\n", vl_version());
      return 0;
    } else if (strcmp(argv[i], "--local") == 0) {
      c.local = true;
    } else if (valued && value != NULL && strcmp(flag, "--socket") == 0) {
      c.socket = value;
    } else if (valued && value != NULL) {
      if (!parse_int(value, &c.timeout_ms)) {
        return usage_error("--timeout-ms %s: not a number of milliseconds", value);
      }
    } else {
      return usage_error("unknown option %s", argv[i]);
    }
  }
  if (c.local && c.socket) return usage_error("--socket and --local exclude each other");
  if (i >= argc) return usage_error("a command is required");
  if (strcmp(argv[i], "worker") == 0 && i + 1 < argc &&
      (strcmp(argv[i + 1], "--help") == 0 || strcmp(argv[i + 1], "-h") == 0)) {
    return vl__ctl_help(stdout, "worker") ? 0 : EXIT_USAGE;
  }
  if (strcmp(argv[i], "worker") == 0) { /* a request loop over this main, not a table command */
    return c.socket ? usage_error("worker: requests run in process; --socket does not apply")
                    : vl__ctl_worker(argc - i - 1, argv + i + 1, main);
  }
  const struct command *cmd = NULL;
  for (size_t k = 0; k < sizeof commands / sizeof *commands; k++) {
    if (strcmp(commands[k].name, argv[i]) == 0) cmd = &commands[k];
  }
  if (cmd == NULL) return usage_error("unknown command %s", argv[i]);
  int rc = parse_command_args(&c, cmd, argc - i - 1, argv + i + 1);
  if (rc == 0) rc = cmd->fn(&c);
  if (rc == HELP_SHOWN) rc = 0;
  vl_client_close(c.client);
  return rc;
}
