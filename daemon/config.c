/* config.c - the flag table of viewlowerd and its parser.
 *
 * Adding a flag is adding a row: name, argument kind, bounds, default, the field it sets and
 * a help line. Defaults of the core limits come from vl_limits_default, so the daemon and the
 * library never disagree about them. Values are checked against the row's bounds; a flag
 * given twice keeps the last value, except the allow lists, which accumulate. */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "viewlower/frame.h"

typedef enum { ARG_PATH, ARG_UINT, ARG_BYTES, ARG_MODE, ARG_UID, ARG_GID, ARG_LEVEL } arg_kind;

typedef struct option {
  const char *name;
  const char *metavar;
  arg_kind kind;
  uint64_t min, max;
  uint64_t def;     /* unused by rows with lib_default and by the allow lists */
  bool lib_default; /* the default comes from vl_limits_default */
  size_t offset;
  size_t width; /* bytes of the field for ARG_UINT / ARG_MODE / ARG_LEVEL */
  const char *help;
} option;

#define FIELD(f) offsetof(vld_config, f), sizeof(((vld_config *)0)->f)
#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)

static const option options[] = {
    {"socket", "PATH", ARG_PATH, 0, 0, 0, false, FIELD(socket),
     "listen on PATH (default: $VIEWLOWER_SOCKET, $RUNTIME_DIRECTORY/viewlower.sock, "
     "/run/viewlower/viewlower.sock as root, else $XDG_RUNTIME_DIR/viewlower.sock)"},
    {"socket-mode", "MODE", ARG_MODE, 0, 0777, 0660, false, FIELD(socket_mode),
     "octal permission bits of the socket file"},
    {"workers", "N", ARG_UINT, 1, 1024, 4, false, FIELD(workers),
     "worker threads for lowering and execution (libuv thread pool)"},
    {"max-frame-bytes", "N", ARG_UINT, 1024, (uint64_t)1 << 40, VL_FRAME_DEFAULT_MAX_BYTES, false,
     FIELD(max_frame_bytes), "bound of JSON + payload bytes of one frame"},
    {"max-connections", "N", ARG_UINT, 1, 1000000, 1024, false, FIELD(max_connections),
     "open connections; past it a client gets error -32005 and is closed"},
    {"idle-timeout-ms", "N", ARG_UINT, 0, 86400000, 60000, false, FIELD(idle_timeout_ms),
     "close a connection silent this long with nothing in flight (0: never)"},
    {"allow-uid", "UID", ARG_UID, 0, UINT32_MAX - 1, 0, false, FIELD(allow_uid),
     "also let this user in (number or name; repeatable)"},
    {"allow-gid", "GID", ARG_GID, 0, UINT32_MAX - 1, 0, false, FIELD(allow_gid),
     "also let peers in whose primary or supplementary group is GID (number or name; "
     "repeatable)"},
    {"log-level", "LEVEL", ARG_LEVEL, 0, 0, VLD_LOG_INFO, false, FIELD(log_level),
     "debug, info, warn or error"},
    {"max-inflight", "N", ARG_UINT, 1, 65536, 16, false, FIELD(max_inflight),
     "requests in flight per connection before the daemon stops reading it"},
    {"max-queued", "N", ARG_UINT, 1, 1000000, 256, false, FIELD(max_queued),
     "requests queued or running on the workers, all connections; past it a request gets "
     "error -32005 at once (ping, version and stats are exempt)"},
    {"max-write-queue-bytes", "N", ARG_UINT, 4096, (uint64_t)1 << 40, 64 * MIB, false,
     FIELD(max_write_queue), "queued response bytes per connection before reading stops"},
    {"max-nodes", "N", ARG_UINT, 1, UINT32_MAX - 1, 0, true, FIELD(limits.max_nodes),
     "nodes of one graph"},
    {"max-tensor-bytes", "N", ARG_UINT, 1, INT64_MAX, 0, true, FIELD(limits.max_tensor_bytes),
     "bytes of one tensor"},
    {"max-total-bytes", "N", ARG_UINT, 1, INT64_MAX, 0, true, FIELD(limits.max_total_bytes),
     "bytes of the buffers one execution holds at once (its inputs for the whole run)"},
    {"drain-timeout-ms", "N", ARG_UINT, 0, 3600000, 10000, false, FIELD(drain_timeout_ms),
     "on SIGTERM/SIGINT, wait this long for in-flight requests"},
    {"max-memory", "BYTES", ARG_BYTES, 0, (uint64_t)1 << 50, 0, false, FIELD(max_memory),
     "memory budget of the whole daemon (suffix K, M, G or T: powers of 1024); a request whose "
     "work would pass it gets error -32005 (0: half the RAM, or 3/4 of the cgroup's "
     "memory.max when lower)"},
    {"max-connections-per-uid", "N", ARG_UINT, 0, 1000000, 0, false, FIELD(max_conns_per_uid),
     "open connections of one user; past it the user gets error -32005 and is closed (0: 3/4 "
     "of --max-connections)"},
    {"max-queued-per-uid", "N", ARG_UINT, 0, 1000000, 0, false, FIELD(max_queued_per_uid),
     "requests of one user queued or running on the workers while other users are connected; "
     "past it the user's next heavy request gets error -32005 at once (0: 3/4 of --max-queued)"},
    {"max-memory-per-uid", "BYTES", ARG_BYTES, 0, (uint64_t)1 << 50, 0, false,
     FIELD(max_memory_per_uid),
     "memory held by one user's unread responses while other users are connected (suffix K, M, "
     "G or T); past it the daemon stops reading the user's connections with unread responses "
     "and answers its requests not yet started with error -32005 (0: half of --max-memory)"},
    {"worker-nice", "N", ARG_UINT, 0, 19, 0, false, FIELD(worker_nice),
     "run the workers this much nicer than the event loop, so that the loop's I/O, pings and "
     "small requests come first when the CPUs are busy; for a daemon in a cgroup of its own, "
     "as the systemd unit runs it with 10 (0: the same)"},
    {"loops", "N", ARG_UINT, 0, 64, 0, false, FIELD(loops),
     "event loops, each on a thread of its own, that serve connections (a new connection goes "
     "to the loop with the fewest); one takes signals and accepts (0: one per online CPU, at "
     "most 8)"},
};

enum { N_OPTIONS = sizeof options / sizeof options[0] };

static void store_uint(vld_config *cfg, const option *o, uint64_t v) {
  uint8_t *at = (uint8_t *)cfg + o->offset;
  if (o->width == sizeof(uint32_t)) {
    uint32_t x = (uint32_t)v;
    memcpy(at, &x, sizeof x);
  } else {
    memcpy(at, &v, sizeof v); /* uint64_t, or int64_t holding a value within its bounds */
  }
}

static uint64_t load_uint(const vld_config *cfg, const option *o) {
  const uint8_t *at = (const uint8_t *)cfg + o->offset;
  if (o->width == sizeof(uint32_t)) {
    uint32_t x;
    memcpy(&x, at, sizeof x);
    return x;
  }
  uint64_t v;
  memcpy(&v, at, sizeof v);
  return v;
}

void vld_config_init(vld_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  vl_limits_default(&cfg->limits);
  for (size_t i = 0; i < N_OPTIONS; i++) {
    const option *o = &options[i];
    if (!o->lib_default && (o->kind == ARG_UINT || o->kind == ARG_BYTES || o->kind == ARG_MODE ||
                            o->kind == ARG_LEVEL)) {
      store_uint(cfg, o, o->def);
    }
  }
}

/* A whole number of bytes, optionally followed by K, M, G or T (powers of 1024). */
static bool parse_bytes(const char *s, uint64_t *out) {
  if (s[0] < '0' || s[0] > '9') {
    return false;
  }
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  unsigned shift = 0;
  switch (*end) {
  case '\0': break;
  case 'K': case 'k': shift = 10; break;
  case 'M': case 'm': shift = 20; break;
  case 'G': case 'g': shift = 30; break;
  case 'T': case 't': shift = 40; break;
  default: return false;
  }
  if (errno != 0 || (shift > 0 && end[1] != '\0') || v > (UINT64_MAX >> shift)) {
    return false;
  }
  *out = (uint64_t)v << shift;
  return true;
}

/* A whole unsigned number in base 8 or 10, no sign, no trailing characters. */
static bool parse_number(const char *s, int base, uint64_t *out) {
  if (s[0] < '0' || s[0] > '9') {
    return false;
  }
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, base);
  if (errno != 0 || *end != '\0') {
    return false;
  }
  *out = v;
  return true;
}

static bool parse_id(const option *o, const char *s, uint64_t *out) {
  if (parse_number(s, 10, out)) {
    return true;
  }
  if (o->kind == ARG_UID) {
    struct passwd *pw = getpwnam(s);
    *out = pw != NULL ? pw->pw_uid : 0;
    return pw != NULL;
  }
  struct group *gr = getgrnam(s);
  *out = gr != NULL ? gr->gr_gid : 0;
  return gr != NULL;
}

static bool add_id(vld_config *cfg, const option *o, uint64_t v, char *errbuf, size_t n) {
  bool uid = o->kind == ARG_UID;
  size_t *count = uid ? &cfg->n_allow_uid : &cfg->n_allow_gid;
  uint32_t *list = uid ? cfg->allow_uid : cfg->allow_gid;
  if (*count == VLD_CONFIG_MAX_IDS) {
    snprintf(errbuf, n, "--%s: at most %d entries", o->name, VLD_CONFIG_MAX_IDS);
    return false;
  }
  list[(*count)++] = (uint32_t)v;
  return true;
}

/* Parses and stores one flag's value. */
static bool apply(vld_config *cfg, const option *o, const char *value, char *errbuf, size_t n) {
  uint64_t v = 0;
  vld_log_level level;
  bool ok = true;
  switch (o->kind) {
  case ARG_PATH: memcpy((uint8_t *)cfg + o->offset, &value, sizeof value); return true;
  case ARG_LEVEL:
    ok = vld_log_level_from_name(value, &level);
    v = (uint64_t)level;
    break;
  case ARG_MODE: ok = parse_number(value, 8, &v); break;
  case ARG_UINT: ok = parse_number(value, 10, &v); break;
  case ARG_BYTES: ok = parse_bytes(value, &v); break;
  case ARG_UID:
  case ARG_GID: ok = parse_id(o, value, &v); break;
  }
  if (!ok || (o->kind != ARG_LEVEL && (v < o->min || v > o->max))) {
    snprintf(errbuf, n, "--%s: invalid value '%s' (see --help)", o->name, value);
    return false;
  }
  if (o->kind == ARG_UID || o->kind == ARG_GID) {
    return add_id(cfg, o, v, errbuf, n);
  }
  store_uint(cfg, o, v);
  return true;
}

static const option *find_option(const char *name, size_t len) {
  for (size_t i = 0; i < N_OPTIONS; i++) {
    if (strlen(options[i].name) == len && strncmp(options[i].name, name, len) == 0) {
      return &options[i];
    }
  }
  return NULL;
}

vld_config_result vld_config_parse(vld_config *cfg, int argc, char **argv, char *errbuf, size_t n) {
  vld_config_init(cfg);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      return VLD_CONFIG_HELP;
    }
    if (strcmp(a, "--version") == 0) {
      return VLD_CONFIG_VERSION;
    }
    if (strncmp(a, "--", 2) != 0) {
      snprintf(errbuf, n, "unexpected argument '%s' (see --help)", a);
      return VLD_CONFIG_ERROR;
    }
    const char *eq = strchr(a + 2, '=');
    size_t len = eq != NULL ? (size_t)(eq - (a + 2)) : strlen(a + 2);
    const option *o = find_option(a + 2, len);
    if (o == NULL) {
      snprintf(errbuf, n, "unknown flag '%.*s' (see --help)", (int)(len + 2), a);
      return VLD_CONFIG_ERROR;
    }
    const char *value = eq != NULL ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
    if (value == NULL) {
      snprintf(errbuf, n, "--%s needs a value", o->name);
      return VLD_CONFIG_ERROR;
    }
    if (!apply(cfg, o, value, errbuf, n)) {
      return VLD_CONFIG_ERROR;
    }
  }
  /* Shares left at 0 are three quarters of the whole, rounded up: others keep a quarter. */
  if (cfg->max_conns_per_uid == 0) {
    cfg->max_conns_per_uid = (uint32_t)(((uint64_t)cfg->max_connections * 3 + 3) / 4);
  }
  if (cfg->max_queued_per_uid == 0) {
    cfg->max_queued_per_uid = (uint32_t)(((uint64_t)cfg->max_queued * 3 + 3) / 4);
  }
  return VLD_CONFIG_OK;
}

static void print_default(FILE *out, const vld_config *def, const option *o) {
  switch (o->kind) {
  case ARG_MODE: fprintf(out, " (default %04" PRIo64 ")", load_uint(def, o)); break;
  case ARG_LEVEL:
    fprintf(out, " (default %s)", vld_log_level_name((vld_log_level)load_uint(def, o)));
    break;
  case ARG_UINT:
    fprintf(out, " (%" PRIu64 "..%" PRIu64 ", default %" PRIu64 ")", o->min, o->max,
            load_uint(def, o));
    break;
  case ARG_BYTES: fprintf(out, " (default 0)"); break;
  default: break;
  }
}

void vld_config_usage(FILE *out) {
  vld_config def;
  vld_config_init(&def);
  fputs("usage: viewlowerd [FLAG VALUE | FLAG=VALUE]...\n"
        "Serves the viewlower methods (JSON-RPC 2.0 over framed messages) on a Unix socket,\n"
        "in the foreground. Stop it with SIGTERM or SIGINT.\n\n",
        out);
  for (size_t i = 0; i < N_OPTIONS; i++) {
    const option *o = &options[i];
    fprintf(out, "  --%s %s\n      %s", o->name, o->metavar, o->help);
    print_default(out, &def, o);
    fputc('\n', out);
  }
  fputs("  --version\n      print the version and the protocol number and exit\n"
        "  --help\n      print this text and exit\n",
        out);
}

unsigned vld_config_loops(const vld_config *cfg) {
  if (cfg->loops > 0) {
    return cfg->loops;
  }
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus < 1 ? 1 : cpus > VLD_DEFAULT_MAX_LOOPS ? VLD_DEFAULT_MAX_LOOPS : (unsigned)cpus;
}
