/* load.c - viewlower-load: a load generator for viewlowerd.
 *
 * N client threads, each with its own vl_client, send a seeded random mix of valid and invalid
 * requests of every method, keeping up to --pipeline requests in flight, for a bounded count
 * and/or time. With --warmup-ms the run has two phases: a warm-up, after which every client
 * disconnects and the daemon is measured idle, then the main phase (throughput and latency are
 * the main phase's; RSS growth compares the idle daemon after each phase). Every response is
 * matched to its request by id: a response with an id that is not in flight is "mismatched"
 * (duplicates included), a request left without a response when its connection ends is "lost". Each
 * request kind has one expected outcome (a result, or one error code); any other outcome is
 * "unexpected". With --daemon-pid the daemon's RSS and open fd count are read from /proc before,
 * during (sampled) and after the run.
 *
 * Prints one JSON object on stdout. With --check, exits 1 when anything was lost, mismatched
 * or unexpected, a transport error happened, RSS grew past --max-rss-growth-pct after the
 * warm-up, or the fd count did not return to its baseline once the clients left. */
#define _GNU_SOURCE /* strtoull, nanosleep */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "viewlower/client.h"

/* ---------------------------------------------------------------- the request mix */

#define PE_GRAPH                                                                                   \
  "{\"format\":\"viewlower.graph\",\"version\":1,\"name\":\"patch_embed\",\"nodes\":["             \
  "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":[1,2,2,3]}},"   \
  "{\"name\":\"x_cl\",\"op\":\"call_function\",\"target\":"                                        \
  "\"dim_order_ops._to_dim_order_copy.default\",\"args\":[\"x\"],\"kwargs\":{\"dim_order\":"       \
  "[0,2,3,1]},\"val\":{\"dtype\":\"float32\",\"shape\":[1,2,2,3],\"dim_order\":[0,2,3,1]}},"       \
  "{\"name\":\"flat\",\"op\":\"call_function\",\"target\":\"aten.view_copy.default\","             \
  "\"args\":[\"x_cl\",[1,2,-1]],\"val\":{\"dtype\":\"float32\",\"shape\":[1,2,6]}},"               \
  "{\"name\":\"tokens\",\"op\":\"call_function\",\"target\":\"aten.permute_copy.default\","        \
  "\"args\":[\"flat\",[0,2,1]],\"val\":{\"dtype\":\"float32\",\"shape\":[1,6,2]}},"                \
  "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"tokens\"]}]}"
#define INPLACE_GRAPH                                                                              \
  "{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":["                                      \
  "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}},"       \
  "{\"name\":\"base\",\"op\":\"call_function\",\"target\":\"aten.mul.Tensor\",\"args\":"           \
  "[\"x\",2.0],\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}},"                                  \
  "{\"name\":\"early\",\"op\":\"call_function\",\"target\":\"aten.view_copy.default\","            \
  "\"args\":[\"base\",[6]],\"val\":{\"dtype\":\"float32\",\"shape\":[6]}},"                        \
  "{\"name\":\"late\",\"op\":\"call_function\",\"target\":\"aten.view_copy.default\","             \
  "\"args\":[\"base\",[3,2]],\"val\":{\"dtype\":\"float32\",\"shape\":[3,2]}},"                    \
  "{\"name\":\"early_used\",\"op\":\"call_function\",\"target\":\"aten.relu.default\","            \
  "\"args\":[\"early\"],\"val\":{\"dtype\":\"float32\",\"shape\":[6]}},"                           \
  "{\"name\":\"bumped\",\"op\":\"call_function\",\"target\":\"aten.add_.Tensor\",\"args\":"        \
  "[\"base\",1.0],\"val\":{\"dtype\":\"float32\",\"shape\":[2,3]}},"                               \
  "{\"name\":\"late_used\",\"op\":\"call_function\",\"target\":\"aten.mul.Tensor\","               \
  "\"args\":[\"late\",3.0],\"val\":{\"dtype\":\"float32\",\"shape\":[3,2]}},"                      \
  "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"early_used\",\"late_used\"]}]}"
/* A 1 MiB channels-last tensor flattened as if contiguous: the view is kept; verify runs both. */
#define BIG_GRAPH                                                                                  \
  "{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":["                                      \
  "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":"               \
  "[1,64,64,64]}},{\"name\":\"x_cl\",\"op\":\"call_function\",\"target\":"                         \
  "\"dim_order_ops._to_dim_order_copy.default\",\"args\":[\"x\"],\"kwargs\":{\"dim_order\":"       \
  "[0,2,3,1]},\"val\":{\"dtype\":\"float32\",\"shape\":[1,64,64,64],\"dim_order\":"                \
  "[0,2,3,1]}},{\"name\":\"flat\",\"op\":\"call_function\",\"target\":"                            \
  "\"aten.view_copy.default\",\"args\":[\"x_cl\",[1,64,-1]],\"val\":{\"dtype\":\"float32\","       \
  "\"shape\":[1,64,4096]}},{\"name\":\"y\",\"op\":\"call_function\",\"target\":"                   \
  "\"aten.relu.default\",\"args\":[\"flat\"],\"val\":{\"dtype\":\"float32\",\"shape\":"            \
  "[1,64,4096]}},{\"name\":\"out\",\"op\":\"output\",\"args\":[\"y\"]}]}"
#define X_VALUES                                                                                   \
  "{\"dtype\":\"float32\",\"shape\":[1,2,2,3],\"values\":[0,1,2,3,4,5,6,7,8,9,10,11]}"
#define X_BLOB "{\"dtype\":\"float32\",\"shape\":[1,2,2,3],\"blob\":{\"offset\":0,\"nbytes\":48}}"

typedef struct {
  const char *name;
  const char *method;
  const char *params;
  int expect; /* JSON-RPC error code, 0 for a result */
  bool blob;  /* sends the 48-byte payload X_BLOB points into */
} request_kind;

static const request_kind kinds[] = {
    {"ping", "ping", "{}", 0, false},
    {"version", "version", "{}", 0, false},
    {"stats", "stats", "{}", 0, false},
    {"validate", "validate", "{\"graph\":" PE_GRAPH "}", 0, false},
    {"lower", "lower", "{\"graph\":" PE_GRAPH "}", 0, false},
    {"lower_legacy", "lower", "{\"graph\":" INPLACE_GRAPH ",\"options\":{\"policy\":\"legacy\"}}",
     0, false},
    {"execute", "execute", "{\"graph\":" PE_GRAPH ",\"inputs\":{\"x\":" X_VALUES "}}", 0, false},
    {"execute_blob", "execute",
     "{\"graph\":" PE_GRAPH ",\"inputs\":{\"x\":" X_BLOB "},\"encoding\":\"blob\"}", 0, true},
    {"verify", "verify", "{\"graph\":" INPLACE_GRAPH ",\"seed\":7}", 0, false},
    {"verify_1mib", "verify", "{\"graph\":" BIG_GRAPH ",\"seed\":3}", 0, false},
    {"view_copy", "view_copy", "{\"input\":" X_VALUES ",\"size\":[2,-1],\"out_dim_order\":[1,0]}",
     0, false},
    {"view_copy_blob", "view_copy", "{\"input\":" X_BLOB ",\"size\":[12],\"encoding\":\"blob\"}", 0,
     true},
    /* Invalid requests (index >= FIRST_INVALID). */
    {"bad_params", "lower", "{}", -32602, false},
    {"unknown_key", "view_copy", "{\"input\":" X_VALUES ",\"size\":[12],\"sise\":1}", -32602,
     false},
    {"unknown_method", "no_such_method", "{}", -32601, false},
    {"invalid_graph", "lower",
     "{\"graph\":{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":[{\"name\":\"out\","
     "\"op\":\"output\",\"args\":[\"nowhere\"]}]}}",
     -32001, false},
    {"invalid_tensor", "view_copy",
     "{\"input\":{\"dtype\":\"float32\",\"shape\":[2],\"values\":[1]},\"size\":[2]}", -32002,
     false},
    {"kernel_error", "view_copy", "{\"input\":" X_VALUES ",\"size\":[-1,-1]}", -32003, false},
};
enum { N_KINDS = sizeof kinds / sizeof kinds[0], FIRST_INVALID = 12 };

static cJSON *kind_params[N_KINDS];
static uint8_t blob_payload[48];

/* ---------------------------------------------------------------- options */

typedef struct {
  const char *socket;
  const char *kinds;  /* comma list of request kinds to send (NULL: the whole mix) */
  uint32_t kind_mask; /* from kinds */
  unsigned clients;
  unsigned pipeline;
  uint64_t requests;    /* per client; 0: bounded by time only */
  uint64_t duration_ms; /* 0: bounded by count only */
  uint64_t warmup_ms;
  unsigned invalid_pct;
  uint64_t reconnect_every; /* requests per connection; 0: one connection per client */
  uint64_t seed;
  int timeout_ms;
  long daemon_pid;
  bool check;
  bool no_cork; /* one write per request instead of one per pipelined batch */
  double max_rss_growth_pct;
  uint64_t settle_ms;
} config;

static const char usage[] =
    "usage: viewlower-load --socket PATH [--clients N] [--pipeline N] [--requests N]\n"
    "         [--duration-ms N] [--warmup-ms N] [--invalid-pct N] [--reconnect-every N]\n"
    "         [--seed N] [--timeout-ms N] [--daemon-pid PID] [--check]\n"
    "         [--max-rss-growth-pct X] [--settle-ms N] [--kinds KIND,...] [--no-cork]\n"
    "  --requests is per client; at least one of --requests and --duration-ms is needed.\n"
    "  --kinds sends only the listed request kinds (names as in the report's requests_by_kind).\n"
    "  With --pipeline over 1 each client corks its connection (vl_client_cork): the requests\n"
    "  sent before it next waits for a response go out in one write; --no-cork writes each alone.\n";

typedef struct {
  const char *name;
  size_t offset;
  char kind; /* 's' string, 'u' uint64, 'i' unsigned, 'l' long, 'n' int, 'd' double, 'b' flag */
} flag;

#define OPT(name, field, kind)                                                                     \
  { name, offsetof(config, field), kind }
static const flag flags[] = {
    OPT("--socket", socket, 's'),
    OPT("--clients", clients, 'i'),
    OPT("--pipeline", pipeline, 'i'),
    OPT("--requests", requests, 'u'),
    OPT("--duration-ms", duration_ms, 'u'),
    OPT("--warmup-ms", warmup_ms, 'u'),
    OPT("--invalid-pct", invalid_pct, 'i'),
    OPT("--reconnect-every", reconnect_every, 'u'),
    OPT("--seed", seed, 'u'),
    OPT("--timeout-ms", timeout_ms, 'n'),
    OPT("--daemon-pid", daemon_pid, 'l'),
    OPT("--check", check, 'b'),
    OPT("--no-cork", no_cork, 'b'),
    OPT("--max-rss-growth-pct", max_rss_growth_pct, 'd'),
    OPT("--settle-ms", settle_ms, 'u'),
    OPT("--kinds", kinds, 's'),
};

static bool parse_number(const char *s, char kind, void *at) {
  char *end = NULL;
  errno = 0;
  if (kind == 'd') {
    double d = strtod(s, &end);
    if (errno || *end || d < 0) return false;
    *(double *)at = d;
    return true;
  }
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || *s == '-' || *s == '\0') return false;
  switch (kind) {
  case 'u': *(uint64_t *)at = v; return true;
  case 'i':
    if (v > 1000000) return false;
    *(unsigned *)at = (unsigned)v;
    return true;
  case 'n':
    if (v > 86400000) return false;
    *(int *)at = (int)v;
    return true;
  default:
    if (v > 4194304) return false;
    *(long *)at = (long)v;
    return true;
  }
}

static bool parse_flag(config *cfg, int argc, char **argv, int *i) {
  for (size_t f = 0; f < sizeof flags / sizeof *flags; f++) {
    if (strcmp(argv[*i], flags[f].name) != 0) continue;
    void *at = (char *)cfg + flags[f].offset;
    if (flags[f].kind == 'b') {
      *(bool *)at = true;
      return true;
    }
    if (++*i >= argc) return false;
    if (flags[f].kind == 's') {
      *(const char **)at = argv[*i];
      return true;
    }
    return parse_number(argv[*i], flags[f].kind, at);
  }
  return false;
}

/* --kinds "ping,lower" -> a bit per kind; false on an unknown name. */
static bool parse_kinds(config *cfg) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", cfg->kinds);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    unsigned k = 0;
    while (k < N_KINDS && strcmp(kinds[k].name, tok) != 0) k++;
    if (k == N_KINDS) {
      fprintf(stderr, "viewlower-load: unknown request kind \"%s\"\n", tok);
      return false;
    }
    cfg->kind_mask |= 1u << k;
  }
  return cfg->kind_mask != 0;
}

static bool parse_args(config *cfg, int argc, char **argv) {
  *cfg = (config){.clients = 8,
                  .pipeline = 4,
                  .invalid_pct = 30,
                  .seed = 1,
                  .timeout_ms = 30000,
                  .max_rss_growth_pct = 10.0,
                  .settle_ms = 10000};
  for (int i = 1; i < argc; i++) {
    if (!parse_flag(cfg, argc, argv, &i)) {
      fprintf(stderr, "viewlower-load: bad or unknown argument \"%s\"\n%s", argv[i], usage);
      return false;
    }
  }
  if (cfg->kinds != NULL && !parse_kinds(cfg)) return false;
  if (cfg->socket == NULL || (cfg->requests == 0 && cfg->duration_ms == 0) || cfg->clients == 0 ||
      cfg->pipeline == 0 || cfg->pipeline > 64 || cfg->invalid_pct > 100) {
    fprintf(stderr, "%s", usage);
    return false;
  }
  return true;
}

/* ---------------------------------------------------------------- time and /proc */

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void sleep_ms(uint64_t ms) {
  struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* VmRSS of pid in KiB, or -1. */
static long proc_rss_kb(long pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%ld/status", pid);
  FILE *f = fopen(path, "r");
  long kb = -1;
  if (f == NULL) return -1;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
  fclose(f);
  return kb;
}

/* Number of open fds of pid, or -1. */
static long proc_fd_count(long pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/fd", pid);
  DIR *d = opendir(path);
  if (d == NULL) return -1;
  long n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* ---------------------------------------------------------------- one client */

typedef struct {
  uint64_t id;
  unsigned kind;
  uint64_t sent_us;
} in_flight;

typedef struct {
  unsigned index;
  const config *cfg;
  uint64_t deadline_us;    /* end of the current phase (0: none) */
  uint64_t phase_requests; /* requests of the current phase (0: unbounded) */
  uint64_t phase_sent0;    /* sent when the phase began */
  uint64_t rng;
  uint64_t sent, answered, lost, mismatched, unexpected, transport_errors, connects;
  uint64_t kind_count[N_KINDS];
  uint32_t *lat_us;
  size_t n_lat, cap_lat;
  char problem[256]; /* the first unexpected thing seen, for diagnosis */
  in_flight slots[64];
  unsigned n_slots;
} worker;

static const int rpc_codes[] = {-32700, -32600, -32601, -32602, -32603, -32001,
                                -32002, -32003, -32004, -32005, -32006, -32007};
enum { N_RPC = sizeof rpc_codes / sizeof rpc_codes[0] };
static uint64_t errors_total[N_RPC];
static pthread_mutex_t merge_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t next_random(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* A kind from the valid or invalid part of the mix (--invalid-pct), or with --kinds any
 * listed kind. */
static unsigned pick_kind(worker *w) {
  uint64_t r = next_random(&w->rng);
  if (w->cfg->kind_mask) {
    unsigned listed[N_KINDS], n = 0;
    for (unsigned k = 0; k < N_KINDS; k++)
      if (w->cfg->kind_mask & (1u << k)) listed[n++] = k;
    return listed[(r >> 8) % n];
  }
  bool invalid = (r % 100) < w->cfg->invalid_pct;
  uint64_t k = (r >> 8);
  return invalid ? FIRST_INVALID + (unsigned)(k % (N_KINDS - FIRST_INVALID))
                 : (unsigned)(k % FIRST_INVALID);
}

/* Keeps the first problem a client saw: "what: detail". */
static void note_problem(worker *w, const char *what, const char *detail) {
  if (w->problem[0] == '\0') snprintf(w->problem, sizeof w->problem, "%.40s: %.200s", what, detail);
}

static void record_latency(worker *w, uint64_t us) {
  if (w->n_lat == w->cap_lat) {
    size_t cap = w->cap_lat ? 2 * w->cap_lat : 4096;
    uint32_t *p = realloc(w->lat_us, cap * sizeof *p);
    if (p == NULL) return;
    w->lat_us = p;
    w->cap_lat = cap;
  }
  w->lat_us[w->n_lat++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static void count_error(int code) {
  for (size_t i = 0; i < N_RPC; i++)
    if (rpc_codes[i] == code) {
      pthread_mutex_lock(&merge_lock);
      errors_total[i]++;
      pthread_mutex_unlock(&merge_lock);
      return;
    }
}

static vl_status send_one(worker *w, vl_client *c, uint64_t id, vl_error *err) {
  unsigned k = pick_kind(w);
  const request_kind *rk = &kinds[k];
  /* the params' own text (checked to parse at start): nothing printed per request */
  vl_status s =
      vl_client_send_text(c, id, rk->method, rk->params, strlen(rk->params),
                          rk->blob ? blob_payload : NULL, rk->blob ? sizeof blob_payload : 0, err);
  if (s != VL_OK) return s;
  w->slots[w->n_slots++] = (in_flight){id, k, now_us()};
  w->sent++;
  w->kind_count[k]++;
  return VL_OK;
}

/* Checks one response (status s, result text r: JSON the client library checked) against the
 * request it answers. */
static void check_response(worker *w, const in_flight *f, vl_status s, const char *r,
                           const vl_error *err) {
  const request_kind *rk = &kinds[f->kind];
  int code = s == VL_OK ? 0 : vl_status_rpc_code(s);
  if (code != 0) count_error(code);
  bool ok = code == rk->expect;
  if (ok && code == 0 && strcmp(rk->method, "ping") == 0) {
    cJSON *pong = cJSON_Parse(r);
    ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pong, "pong"));
    cJSON_Delete(pong);
  }
  if (ok && code == 0) ok = r != NULL && r[0] == '{'; /* an object */
  if (!ok) {
    w->unexpected++;
    note_problem(w, rk->name, err->message[0] ? err->message : "result not as expected");
  }
}

/* Receives one response and retires its request. */
static vl_status receive_one(worker *w, vl_client *c, vl_error *err) {
  uint64_t id = 0;
  char *result = NULL;
  size_t result_len = 0;
  vl_buf payload = {0};
  vl_error_clear(err);
  vl_status s = vl_client_recv_text(c, &id, &result, &result_len, &payload, err);
  if (vl_client_is_transport_error(s)) return s;
  unsigned i = 0;
  while (i < w->n_slots && w->slots[i].id != id) i++;
  if (i == w->n_slots) {
    w->mismatched++;
    note_problem(w, "response with an id not in flight", err->message);
  } else {
    record_latency(w, now_us() - w->slots[i].sent_us);
    check_response(w, &w->slots[i], s, result, err);
    w->slots[i] = w->slots[--w->n_slots];
    w->answered++;
  }
  free(result);
  vl_buf_free(&payload);
  return VL_OK;
}

static bool may_send(const worker *w, uint64_t on_this_connection) {
  if (w->phase_requests && w->sent - w->phase_sent0 >= w->phase_requests) return false;
  if (w->deadline_us && now_us() >= w->deadline_us) return false;
  return !w->cfg->reconnect_every || on_this_connection < w->cfg->reconnect_every;
}

/* One connection: pipelined sends and receives until this connection's share is done. */
static bool run_connection(worker *w, uint64_t *next_id) {
  vl_client *c = NULL;
  vl_error err;
  vl_error_clear(&err);
  if (vl_client_connect(w->cfg->socket, w->cfg->timeout_ms, &c, &err) != VL_OK) {
    w->transport_errors++;
    note_problem(w, "connect", err.message);
    return false;
  }
  w->connects++;
  uint64_t here = 0;
  vl_status s = VL_OK;
  if (w->cfg->pipeline > 1 && !w->cfg->no_cork) s = vl_client_cork(c, true, &err);
  while (s == VL_OK && (w->n_slots > 0 || may_send(w, here))) {
    while (s == VL_OK && w->n_slots < w->cfg->pipeline && may_send(w, here)) {
      s = send_one(w, c, (*next_id)++, &err);
      here++;
    }
    if (s == VL_OK && w->n_slots > 0) s = receive_one(w, c, &err);
  }
  if (s != VL_OK) {
    w->transport_errors++;
    w->lost += w->n_slots;
    note_problem(w, "transport", err.message);
    w->n_slots = 0;
  }
  vl_client_close(c);
  return s == VL_OK;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  uint64_t next_id = 1; /* ids are unique per connection; each phase reconnects */
  while (may_send(w, 0) && run_connection(w, &next_id)) {
  }
  return NULL;
}

/* ---------------------------------------------------------------- the run */

/* Daemon figures. RSS is compared between idle points (every client gone, fds settled): after
 * the warm-up phase and after the main phase, so what the comparison sees is memory kept, not
 * the momentary peak of whatever requests happen to run together. */
typedef struct {
  long rss_before, rss_after_warmup, rss_peak, rss_after;
  long fds_before, fds_after_warmup, fds_peak, fds_after;
} daemon_figures;

typedef struct {
  const config *cfg;
  atomic_bool done;
  daemon_figures *d;
} sampler;

static void *sampler_main(void *arg) {
  sampler *s = arg;
  while (!atomic_load(&s->done)) {
    sleep_ms(200);
    long rss = proc_rss_kb(s->cfg->daemon_pid);
    long fds = proc_fd_count(s->cfg->daemon_pid);
    if (rss > s->d->rss_peak) s->d->rss_peak = rss;
    if (fds > s->d->fds_peak) s->d->fds_peak = fds;
  }
  return NULL;
}

/* How long the daemon is left alone once its fds are back before RSS is read: it returns free
 * heap pages to the system when its pool goes idle (checked every 100 ms), and both idle
 * points must be read after that, or the comparison measures the timing of the trim. */
enum { IDLE_QUIET_MS = 500 };

/* Waits (up to settle_ms) for the daemon's fd count to come back to the baseline, then, after
 * a quiet moment, reads its fds and RSS. */
static void settle(const config *cfg, long fds_baseline, long *fds, long *rss) {
  uint64_t until = now_us() + cfg->settle_ms * 1000u;
  do {
    *fds = proc_fd_count(cfg->daemon_pid);
    if (*fds <= fds_baseline) break;
    sleep_ms(50);
  } while (now_us() < until);
  sleep_ms(IDLE_QUIET_MS);
  *rss = proc_rss_kb(cfg->daemon_pid);
}

/* Runs every client for one phase; returns its wall time in seconds. */
static double run_phase(const config *cfg, worker *ws, uint64_t duration_ms, uint64_t requests) {
  pthread_t *tids = calloc(cfg->clients, sizeof *tids);
  if (tids == NULL) exit(1);
  uint64_t start = now_us();
  for (unsigned i = 0; i < cfg->clients; i++) {
    ws[i].deadline_us = duration_ms ? start + duration_ms * 1000u : 0;
    ws[i].phase_requests = requests;
    ws[i].phase_sent0 = ws[i].sent;
    if (pthread_create(&tids[i], NULL, worker_main, &ws[i]) != 0) {
      fprintf(stderr, "viewlower-load: cannot start thread %u\n", i);
      exit(1);
    }
  }
  for (unsigned i = 0; i < cfg->clients; i++) pthread_join(tids[i], NULL);
  free(tids);
  return (double)(now_us() - start) / 1e6;
}

static void init_workers(const config *cfg, worker *ws) {
  for (unsigned i = 0; i < cfg->clients; i++) {
    ws[i].index = i;
    ws[i].cfg = cfg;
    ws[i].rng = (cfg->seed + 1) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
    if (ws[i].rng == 0) ws[i].rng = 1;
  }
}

/* Latencies of the main phase only. */
static void forget_latencies(worker *ws, unsigned n) {
  for (unsigned i = 0; i < n; i++) ws[i].n_lat = 0;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

static double percentile_ms(const uint32_t *sorted, size_t n, double p) {
  if (n == 0) return 0.0;
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return (double)sorted[i] / 1000.0;
}

typedef struct {
  uint64_t sent, answered, lost, mismatched, unexpected, transport_errors, connects;
  uint64_t kind_count[N_KINDS];
  uint32_t *lat;
  size_t n_lat;
  char problem[256];
} totals;

static void add_worker(totals *t, const worker *w) {
  t->sent += w->sent;
  t->answered += w->answered;
  t->lost += w->lost;
  t->mismatched += w->mismatched;
  t->unexpected += w->unexpected;
  t->transport_errors += w->transport_errors;
  t->connects += w->connects;
  for (unsigned k = 0; k < N_KINDS; k++) t->kind_count[k] += w->kind_count[k];
  if (t->lat && w->n_lat) memcpy(t->lat + t->n_lat, w->lat_us, w->n_lat * sizeof *t->lat);
  if (t->lat) t->n_lat += w->n_lat;
  if (t->problem[0] == '\0' && w->problem[0] != '\0')
    snprintf(t->problem, sizeof t->problem, "client %u: %.200s", w->index, w->problem);
}

static void merge(const worker *ws, unsigned n, totals *t) {
  memset(t, 0, sizeof *t);
  size_t n_lat = 0;
  for (unsigned i = 0; i < n; i++) n_lat += ws[i].n_lat;
  t->lat = malloc((n_lat ? n_lat : 1) * sizeof *t->lat);
  for (unsigned i = 0; i < n; i++) add_worker(t, &ws[i]);
  if (t->lat) qsort(t->lat, t->n_lat, sizeof *t->lat, cmp_u32);
}

/* ---------------------------------------------------------------- the report */

static void add_num(cJSON *o, const char *k, double v) {
  cJSON_AddNumberToObject(o, k, v);
}

static cJSON *report_daemon(const config *cfg, const daemon_figures *d) {
  cJSON *o = cJSON_CreateObject();
  add_num(o, "pid", (double)cfg->daemon_pid);
  add_num(o, "rss_kb_before", (double)d->rss_before);
  if (cfg->warmup_ms) add_num(o, "rss_kb_after_warmup", (double)d->rss_after_warmup);
  add_num(o, "rss_kb_peak", (double)d->rss_peak);
  add_num(o, "rss_kb_after", (double)d->rss_after);
  add_num(o, "fds_before", (double)d->fds_before);
  if (cfg->warmup_ms) add_num(o, "fds_after_warmup", (double)d->fds_after_warmup);
  add_num(o, "fds_peak", (double)d->fds_peak);
  add_num(o, "fds_after", (double)d->fds_after);
  return o;
}

static double rss_growth_pct(const daemon_figures *d) {
  if (d->rss_after_warmup <= 0 || d->rss_after <= 0) return 0.0;
  return 100.0 * (double)(d->rss_after - d->rss_after_warmup) / (double)d->rss_after_warmup;
}

static cJSON *report(const config *cfg, const totals *t, uint64_t main_answered, double secs,
                     const daemon_figures *d) {
  cJSON *o = cJSON_CreateObject();
  add_num(o, "clients", cfg->clients);
  add_num(o, "pipeline", cfg->pipeline);
  cJSON_AddBoolToObject(o, "corked", cfg->pipeline > 1 && !cfg->no_cork);
  add_num(o, "warmup_seconds", (double)cfg->warmup_ms / 1000.0);
  add_num(o, "seconds", secs);
  add_num(o, "connections", (double)t->connects);
  add_num(o, "requests", (double)t->sent);
  add_num(o, "responses", (double)t->answered);
  add_num(o, "requests_per_s", secs > 0 ? (double)main_answered / secs : 0.0);
  cJSON *lat = cJSON_AddObjectToObject(o, "latency_ms");
  add_num(lat, "p50", percentile_ms(t->lat, t->n_lat, 0.50));
  add_num(lat, "p99", percentile_ms(t->lat, t->n_lat, 0.99));
  add_num(lat, "max", t->n_lat ? (double)t->lat[t->n_lat - 1] / 1000.0 : 0.0);
  cJSON *errs = cJSON_AddObjectToObject(o, "errors_by_code");
  for (size_t i = 0; i < N_RPC; i++) {
    char key[16];
    snprintf(key, sizeof key, "%d", rpc_codes[i]);
    if (errors_total[i]) add_num(errs, key, (double)errors_total[i]);
  }
  cJSON *mix = cJSON_AddObjectToObject(o, "requests_by_kind");
  for (unsigned k = 0; k < N_KINDS; k++) add_num(mix, kinds[k].name, (double)t->kind_count[k]);
  add_num(o, "lost", (double)t->lost);
  add_num(o, "mismatched_ids", (double)t->mismatched);
  add_num(o, "unexpected", (double)t->unexpected);
  add_num(o, "transport_errors", (double)t->transport_errors);
  if (t->problem[0]) cJSON_AddStringToObject(o, "first_problem", t->problem);
  if (cfg->daemon_pid > 0) {
    cJSON_AddItemToObject(o, "daemon", report_daemon(cfg, d));
    if (cfg->warmup_ms) add_num(o, "rss_growth_pct_after_warmup", rss_growth_pct(d));
  }
  return o;
}

static void fail_if(cJSON *list, bool cond, const char *what) {
  if (cond) cJSON_AddItemToArray(list, cJSON_CreateString(what));
}

/* The --check verdict: a list of failed conditions (empty when clean). */
static cJSON *failures(const config *cfg, const totals *t, const daemon_figures *d) {
  cJSON *f = cJSON_CreateArray();
  fail_if(f, t->lost > 0, "lost responses");
  fail_if(f, t->mismatched > 0, "mismatched ids");
  fail_if(f, t->unexpected > 0, "unexpected outcomes");
  fail_if(f, t->transport_errors > 0, "transport errors");
  fail_if(f, t->answered != t->sent, "unanswered requests");
  fail_if(f, t->sent == 0, "no requests sent");
  if (cfg->daemon_pid > 0) {
    fail_if(f, d->rss_after < 0, "daemon gone");
    fail_if(f, cfg->warmup_ms && rss_growth_pct(d) > cfg->max_rss_growth_pct,
            "RSS grew after warm-up");
    fail_if(f, d->fds_after != d->fds_before, "fd count not back to baseline");
  }
  return f;
}

static bool build_params(void) {
  for (unsigned k = 0; k < N_KINDS; k++) {
    kind_params[k] = cJSON_Parse(kinds[k].params);
    if (kind_params[k] == NULL) {
      fprintf(stderr, "viewlower-load: internal: params of %s do not parse\n", kinds[k].name);
      return false;
    }
  }
  for (unsigned i = 0; i < 12; i++) {
    float v = (float)i;
    memcpy(blob_payload + 4 * i, &v, 4);
  }
  return true;
}

static void print_and_free(cJSON *out) {
  char *text = cJSON_PrintUnformatted(out);
  printf("%s\n", text ? text : "{}");
  fflush(stdout);
  free(text);
  cJSON_Delete(out);
}

/* Warm-up phase (clients then leave; the daemon is measured idle), then the main phase. */
static double run_phases(const config *cfg, worker *ws, daemon_figures *d,
                         uint64_t *main_answered) {
  bool watch = cfg->daemon_pid > 0;
  uint64_t warm_answered = 0;
  if (cfg->warmup_ms) {
    run_phase(cfg, ws, cfg->warmup_ms, 0);
    if (watch) settle(cfg, d->fds_before, &d->fds_after_warmup, &d->rss_after_warmup);
    for (unsigned i = 0; i < cfg->clients; i++) warm_answered += ws[i].answered;
    forget_latencies(ws, cfg->clients);
  }
  double secs = run_phase(cfg, ws, cfg->duration_ms, cfg->requests);
  if (watch) settle(cfg, d->fds_before, &d->fds_after, &d->rss_after);
  uint64_t all = 0;
  for (unsigned i = 0; i < cfg->clients; i++) all += ws[i].answered;
  *main_answered = all - warm_answered;
  return secs;
}

int main(int argc, char **argv) {
  config cfg;
  if (!parse_args(&cfg, argc, argv) || !build_params()) return 64;
  daemon_figures d = {-1, -1, -1, -1, -1, -1, -1, -1};
  if (cfg.daemon_pid > 0) {
    d.rss_before = proc_rss_kb(cfg.daemon_pid);
    d.fds_before = proc_fd_count(cfg.daemon_pid);
  }
  worker *ws = calloc(cfg.clients, sizeof *ws);
  if (ws == NULL) return 1;
  init_workers(&cfg, ws);
  sampler smp = {.cfg = &cfg, .d = &d};
  atomic_init(&smp.done, false);
  pthread_t sampler_tid;
  bool sampling = cfg.daemon_pid > 0 && pthread_create(&sampler_tid, NULL, sampler_main, &smp) == 0;
  uint64_t main_answered = 0;
  double secs = run_phases(&cfg, ws, &d, &main_answered);
  atomic_store(&smp.done, true);
  if (sampling) pthread_join(sampler_tid, NULL);
  totals t;
  merge(ws, cfg.clients, &t);
  cJSON *out = report(&cfg, &t, main_answered, secs, &d);
  cJSON *fails = failures(&cfg, &t, &d);
  bool failed = cfg.check && cJSON_GetArraySize(fails) > 0;
  if (cfg.check)
    cJSON_AddItemToObject(out, "failures", fails);
  else
    cJSON_Delete(fails);
  print_and_free(out);
  free(t.lat);
  for (unsigned i = 0; i < cfg.clients; i++) free(ws[i].lat_us);
  for (unsigned k = 0; k < N_KINDS; k++) cJSON_Delete(kind_params[k]);
  free(ws);
  return failed ? 1 : 0;
}
