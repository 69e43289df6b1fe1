/* server.c - the listening socket, admission of connections, signals, watchdog and the
 * graceful shutdown of viewlowerd (docs/daemon.md, "Running" and "Behaviour").
 *
 * Socket: taken from systemd socket activation when passed, else created at the path
 * resolved as docs/daemon.md, "Running", lists. An existing socket file is probed: if a daemon
 * answers, starting fails; if nobody listens it is stale and replaced. The socket is bound
 * under a umask that leaves it private, then given --socket-mode.
 * Admission: SO_PEERCRED; a peer is let in when its uid is ours or listed, or its gid is
 * listed; otherwise -32006. Past --max-connections a peer gets -32005. Both then close.
 * Shutdown (SIGTERM/SIGINT): stop accepting, stop reading, finish what was received, close
 * each connection as it drains; --drain-timeout-ms bounds the wait, after which remaining
 * connections are closed. When the last connection is gone every server handle is closed
 * and the loop ends. */
#define _GNU_SOURCE /* struct ucred, SO_PEERCRED */
#include "server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "memory.h"
#include "systemd.h"

enum { LISTEN_BACKLOG = 511, PATH_BUF = 108, HUP_PROBE_MS = 100, MEM_WAIT_MS = 10 };
enum { KEEP_IDLE_PROBES = 10 };
enum { LOOP_STACK = 8 << 20 };
/* File descriptors kept free beyond the connections: the loop's own, the spare that drops a
 * connection, logs and sd_notify. Connections are capped below the soft RLIMIT_NOFILE by this
 * much, so accept never meets EMFILE (where libuv would drop connections without a word). */
enum { FD_RESERVE = 32, FD_REFUSING = 64 /* room for refused peers being answered */ };
enum { FD_PER_LOOP = 4 };

/* ---- socket path ---------------------------------------------------------------------- */

static int set_path(char *out, size_t n, const char *a, const char *b) {
  int w = snprintf(out, n, "%s%s", a, b);
  if (w < 0 || (size_t)w >= n) {
    vld_log_error("socket path %s%s is longer than %zu bytes", a, b, n - 1);
    return -1;
  }
  return 0;
}

/* --socket, $VIEWLOWER_SOCKET, $RUNTIME_DIRECTORY (its first entry), root's default,
 * $XDG_RUNTIME_DIR. */
static int resolve_path(const vld_config *cfg, char *out, size_t n) {
  const char *env = getenv("VIEWLOWER_SOCKET");
  const char *rt = getenv("RUNTIME_DIRECTORY");
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  if (cfg->socket != NULL) {
    return set_path(out, n, cfg->socket, "");
  }
  if (env != NULL && env[0] != '\0') {
    return set_path(out, n, env, "");
  }
  if (rt != NULL && rt[0] != '\0') {
    char first[PATH_BUF];
    snprintf(first, sizeof first, "%.*s", (int)strcspn(rt, ":"), rt);
    return set_path(out, n, first, "/viewlower.sock");
  }
  if (geteuid() == 0) {
    if (mkdir("/run/viewlower", 0755) != 0 && errno != EEXIST) {
      vld_log_error("cannot create /run/viewlower: %s", strerror(errno));
      return -1;
    }
    return set_path(out, n, "/run/viewlower/viewlower.sock", "");
  }
  if (xdg != NULL && xdg[0] != '\0') {
    return set_path(out, n, xdg, "/viewlower.sock");
  }
  vld_log_error("no socket path: give --socket, or set VIEWLOWER_SOCKET or XDG_RUNTIME_DIR");
  return -1;
}

/* Does a daemon accept connections on path? */
static bool socket_is_live(const char *path) {
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path, path, strlen(path) + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return false;
  }
  bool live = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
  close(fd);
  return live;
}

/* Leaves the path free for bind: replaces a stale socket, refuses a live one or a non-socket. */
static int clear_path(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) {
    if (errno == ENOENT) {
      return 0;
    }
    vld_log_error("%s: %s", path, strerror(errno));
    return -1;
  }
  if (!S_ISSOCK(st.st_mode)) {
    vld_log_error("%s exists and is not a socket; not touching it", path);
    return -1;
  }
  if (socket_is_live(path)) {
    vld_log_error("another daemon is already listening on %s", path);
    return -1;
  }
  if (unlink(path) != 0 && errno != ENOENT) {
    vld_log_error("cannot remove the stale socket %s: %s", path, strerror(errno));
    return -1;
  }
  vld_log_info("replaced the stale socket %s", path);
  return 0;
}

/* The directory of path must exist: bind would report a missing one as "permission denied"
 * (libuv maps the ENOENT of its connect-style checks to EACCES). */
static int check_directory(const char *path) {
  char dir[PATH_BUF];
  const char *slash = strrchr(path, '/');
  if (slash == NULL) {
    return 0;
  }
  snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
  struct stat st;
  if (stat(dir, &st) != 0) {
    vld_log_error("cannot listen on %s: the directory %s %s", path, dir,
                 errno == ENOENT ? "does not exist" : strerror(errno));
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) {
    vld_log_error("cannot listen on %s: %s is not a directory", path, dir);
    return -1;
  }
  return 0;
}

/* Two daemons starting on one path take turns: each holds an exclusive flock on PATH.lock from
 * the stale-socket probe until it listens, so the probe and bind of one never interleave with
 * another's (one would otherwise take the other's fresh socket, bound but not yet listening,
 * for stale and replace it). The second then finds the first listening and stops. The lock
 * file stays: removing it would reopen the race. */
static int lock_path(vld_server *srv, const char *path) {
  char lock[PATH_BUF + 8];
  snprintf(lock, sizeof lock, "%s.lock", path);
  int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    /* e.g. a file another user made there: start anyway, only without the start-up lock */
    vld_log_warn("cannot open the lock file %s: %s; starting without it", lock, strerror(errno));
    return 0;
  }
  while (flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      vld_log_error("cannot lock %s: %s", lock, strerror(errno));
      close(fd);
      return -1;
    }
  }
  srv->lock_fd = fd;
  return 0;
}

static void unlock_path(vld_server *srv) {
  if (srv->lock_fd >= 0) {
    close(srv->lock_fd);
    srv->lock_fd = -1;
  }
}

/* Binds our own socket file; srv->socket_path is set only once the file is ours, with the
 * device and inode that tell it from a file another daemon bound there later. */
static int bind_path(vld_server *srv) {
  char path[PATH_BUF];
  if (resolve_path(srv->cfg, path, sizeof path) != 0 || check_directory(path) != 0 ||
      lock_path(srv, path) != 0 || clear_path(path) != 0) {
    return -1;
  }
  /* Bound here, not by uv_pipe_bind: libuv unlinks the path it bound when the handle closes,
   * whatever file is there by then, and reports a missing directory as EACCES. */
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path, path, strlen(path) + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  mode_t old = umask(0177); /* the socket is private until chmod gives it --socket-mode */
  /* listening at once: a client that sees the file can connect (it waits in the backlog
   * until the loop runs); uv_listen later only sets the callback */
  int rc = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
                   listen(fd, LISTEN_BACKLOG) == 0
               ? 0
               : -errno;
  umask(old);
  if (rc != 0) {
    vld_log_error("cannot bind %s: %s", path, strerror(-rc));
    if (fd >= 0) {
      close(fd);
    }
    return -1;
  }
  memcpy(srv->socket_path, path, sizeof path);
  srv->listen_fd = fd;
  struct stat st;
  if (chmod(path, (mode_t)srv->cfg->socket_mode) != 0 || lstat(path, &st) != 0) {
    vld_log_error("chmod %s: %s", path, strerror(errno));
    return -1;
  }
  srv->socket_dev = st.st_dev;
  srv->socket_ino = st.st_ino;
  srv->socket_ctime = st.st_ctim;
  return 0;
}

/* ---- what the loops share --------------------------------------------------------------- */

static void lock(vld_server *srv) {
  uv_mutex_lock(&srv->mu);
}

static void unlock(vld_server *srv) {
  uv_mutex_unlock(&srv->mu);
}

typedef enum { CMD_DRAIN, CMD_CLOSE_ALL, CMD_EXPIRE, CMD_FINISH } command;

/* Posts cmd to every loop and wakes it, under the lock. Nothing is posted once the finish is:
 * a finished loop's wake handle is closed. */
static void post_locked(vld_server *srv, command cmd) {
  if (srv->finish_posted) {
    return;
  }
  srv->finish_posted = cmd == CMD_FINISH;
  for (unsigned i = 0; i < srv->n_shards; i++) {
    vld_shard *sh = &srv->shards[i];
    sh->cmd_drain |= cmd == CMD_DRAIN;
    sh->cmd_close_all |= cmd == CMD_CLOSE_ALL;
    sh->cmd_expire |= cmd == CMD_EXPIRE;
    sh->cmd_finish |= cmd == CMD_FINISH;
    uv_async_send(&sh->wake);
  }
}

static void post_all(vld_server *srv, command cmd) {
  lock(srv);
  post_locked(srv, cmd);
  unlock(srv);
}

/* A connection object was freed: a shutdown is finished once none is left on any loop. */
static void finish_if_done(vld_server *srv) {
  lock(srv);
  if (srv->shutting_down && srv->n_objects == 0) {
    post_locked(srv, CMD_FINISH);
  }
  unlock(srv);
}

/* ---- admission ------------------------------------------------------------------------ */

static bool listed(const uint32_t *ids, size_t n, uint32_t id) {
  for (size_t i = 0; i < n; i++) {
    if (ids[i] == id) {
      return true;
    }
  }
  return false;
}

/* Reads the peer's credentials; false when they cannot be read (then the peer is refused). */
static bool peer_credentials(vld_peer *p) {
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(p->fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return false;
  }
  p->pid = cred.pid;
  p->uid = cred.uid;
  p->gid = cred.gid;
  return true;
}

/* A peer is let in when its uid is ours or listed, or its primary group (SO_PEERCRED) or one
 * of its supplementary groups (SO_PEERGROUPS, Linux >= 4.13) is listed: `usermod -aG viewlower
 * USER` adds a supplementary group. The group list is read only when --allow-gid is given and
 * the uid and primary gid did not already decide; a list that cannot be read admits nobody by
 * it. It holds at most NGROUPS_MAX (65536) entries, so its buffer is bounded. */
static bool permitted(const vld_server *srv, const vld_peer *p) {
  const vld_config *cfg = srv->cfg;
  if (p->uid == srv->self_uid || listed(cfg->allow_uid, cfg->n_allow_uid, p->uid) ||
      listed(cfg->allow_gid, cfg->n_allow_gid, p->gid)) {
    return true;
  }
  if (cfg->n_allow_gid == 0) {
    return false;
  }
  gid_t small[64];
  gid_t *groups = small;
  socklen_t len = sizeof small;
  int rc = getsockopt(p->fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len);
  if (rc != 0 && errno == ERANGE && len <= 65536 * sizeof(gid_t) &&
      (groups = malloc(len)) != NULL) {
    rc = getsockopt(p->fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len);
  }
  bool found = false;
  for (size_t i = 0; rc == 0 && groups != NULL && i < len / sizeof(gid_t) && !found; i++) {
    found = listed(cfg->allow_gid, cfg->n_allow_gid, groups[i]);
  }
  if (groups != small) {
    free(groups);
  }
  return found;
}

/* Counts a refusal and warns about its condition, at most once per VLD_LOG_LIMIT_MS each (a
 * flood of refused peers must not flood the log); every peer gets a debug line. */
static void count_refusal(vld_server *srv, vld_refusal why, const char *text) {
  lock(srv);
  srv->stats.conns_rejected++;
  srv->stats.refused[why]++;
  vld_log_limited(&srv->refusal_log[why], VLD_LOG_WARN, "refusing connections (%s): %s",
                  vld_refusal_names[why], text);
  unlock(srv);
}

/* Why a peer is not let in. */
typedef struct verdict {
  vld_refusal why;
  vl_status code;
  char text[128];
} verdict;

static void refuse(vld_server *srv, vld_conn *c, const verdict *v) {
  vl_error err;
  vl_error_set(&err, v->code, "", "%s", v->text);
  count_refusal(srv, v->why, v->text);
  vld_log_debug("conn %llu (uid %u, gid %u, pid %d) refused: %s", (unsigned long long)c->serial,
                (unsigned)c->uid, (unsigned)c->gid, (int)c->pid, v->text);
  vld_conn_refuse(c, &err);
}

/* Gives back the connection slot of a peer admitted to sh, and its user's. Under the lock. */
static void release_slot(vld_shard *sh, uid_t uid) {
  vld_server *srv = sh->srv;
  srv->n_conns--;
  sh->n_conns--;
  vld_uid_use *u = vld_shares_find(&srv->shares, uid); /* present: it counts the peer */
  if (u != NULL) {
    u->conns--;
    vld_shares_forget(&srv->shares, u);
  }
}

/* ---- the connections' callbacks ------------------------------------------------------- */

static void link_conn(vld_shard *sh, vld_conn *c) {
  lock(sh->srv);
  c->serial = ++sh->srv->next_serial;
  sh->srv->n_objects++;
  unlock(sh->srv);
  c->next = sh->conns;
  if (sh->conns != NULL) {
    sh->conns->prev = c;
  }
  sh->conns = c;
}

static void conn_on_frame(vld_conn *c, vl_frame *frame) {
  vld_shard *sh = c->owner;
  vld_dispatch_frame(&sh->dispatch, c, frame);
}

/* ---- the memory queue ------------------------------------------------------------------ *
 * A frame that does not fit the budget waits, unread, in a queue; frames are admitted from its
 * head as memory frees (the mem_wait timer, every MEM_WAIT_MS), and a frame never overtakes one
 * that waits, so a large frame is not starved by smaller ones. The order is fair across users
 * (start-time fair queueing): a user's next waiting frame gets the ticket after both the last
 * admitted one and that user's previous one, so a user with ten waiting connections and a user
 * with one take turns rather than the ten going first. Equal tickets keep arrival order.
 * The queue is one for all loops, under the lock; a connection's own loop is the only one that
 * queues, dequeues or resumes it (so its mem_queued is read there without the lock), and each
 * loop's timer resumes its own connections when they reach the head. */

static void mem_dequeue(vld_server *srv, vld_conn *c) {
  if (!c->mem_queued) {
    return;
  }
  if (c->mem_prev != NULL) {
    c->mem_prev->mem_next = c->mem_next;
  } else {
    srv->mem_head = c->mem_next;
  }
  if (c->mem_next != NULL) {
    c->mem_next->mem_prev = c->mem_prev;
  }
  c->mem_prev = c->mem_next = NULL;
  c->mem_queued = false;
  srv->n_mem_waiting--;
}

static void mem_enqueue(vld_server *srv, vld_conn *c) {
  vld_uid_use *u = vld_shares_find(&srv->shares, c->uid); /* present: it counts c */
  uint64_t last = u != NULL ? u->mem_ticket : 0;
  c->mem_ticket = (last > srv->mem_vtime ? last : srv->mem_vtime) + 1;
  if (u != NULL) {
    u->mem_ticket = c->mem_ticket;
  }
  c->mem_since_ms = uv_now(c->pipe.loop);
  vld_conn *prev = NULL, *at = srv->mem_head;
  while (at != NULL && at->mem_ticket <= c->mem_ticket) {
    prev = at;
    at = at->mem_next;
  }
  c->mem_prev = prev;
  c->mem_next = at;
  if (prev != NULL) {
    prev->mem_next = c;
  } else {
    srv->mem_head = c;
  }
  if (at != NULL) {
    at->mem_prev = c;
  }
  c->mem_queued = true;
  srv->n_mem_waiting++;
  vld_log_debug("conn %llu (uid %u): its frame waits for memory (ticket %llu, %u waiting)",
                (unsigned long long)c->serial, (unsigned)c->uid,
                (unsigned long long)c->mem_ticket, srv->n_mem_waiting);
}

static bool conn_admit_memory(vld_conn *c, uint64_t bytes) {
  vld_server *srv = ((vld_shard *)c->owner)->srv;
  bool admitted = false;
  lock(srv);
  /* charged, not only checked: the frame decoder allocates the body next, on this thread */
  if (!c->mem_queued && srv->mem_head == NULL && vld_mem_charge(bytes)) {
    admitted = true;
  } else {
    if (!c->mem_queued) {
      mem_enqueue(srv, c);
    }
    if (srv->mem_head == c && vld_mem_charge(bytes)) {
      mem_dequeue(srv, c);
      srv->mem_vtime = c->mem_ticket;
      srv->stats.memory_waits_admitted++;
      admitted = true;
    }
  }
  unlock(srv);
  return admitted;
}

static void conn_on_closing(vld_conn *c) {
  vld_server *srv = ((vld_shard *)c->owner)->srv;
  lock(srv);
  mem_dequeue(srv, c);
  unlock(srv);
  vld_dispatch_cancel(c);
}

/* The socket is closed: its descriptor and its connection slot (and its user's) are free, even
 * while running work still holds c (that work will not be answered). */
static void conn_on_closed(vld_conn *c) {
  vld_shard *sh = c->owner;
  vld_server *srv = sh->srv;
  lock(srv);
  srv->n_open--;
  if (c->counted) {
    c->counted = false;
    release_slot(sh, c->uid);
  }
  unlock(srv);
}

static void watch_memory(vld_shard *sh);

static void conn_on_free(vld_conn *c) {
  vld_shard *sh = c->owner;
  if (c->prev != NULL) {
    c->prev->next = c->next;
  } else {
    sh->conns = c->next;
  }
  if (c->next != NULL) {
    c->next->prev = c->prev;
  }
  lock(sh->srv);
  sh->srv->n_objects--;
  unlock(sh->srv);
  finish_if_done(sh->srv);
}

static void conn_on_wait_memory(vld_conn *c) {
  watch_memory(c->owner);
}

static void conn_on_stream_error(vld_conn *c, const vl_error *err) {
  vld_server *srv = ((vld_shard *)c->owner)->srv;
  if (err->code == VL_ERR_OVERLOADED) {
    lock(srv);
    srv->stats.shed[VLD_SHED_MEMORY]++; /* a frame that can never fit the budget */
    unlock(srv);
  }
}

/* May c, with responses its peer has not taken, be read on? Not while the daemon is over its
 * budget, nor while its user is at its memory share with another user present (the rule is
 * vld_shares_over_memory): a user pipelining requests without reading the answers holds at
 * most its share, and the others' requests keep the rest of the budget. */
static bool conn_memory_allows(vld_conn *c) {
  if (!vld_mem_fits(0)) {
    return false;
  }
  vld_server *srv = ((vld_shard *)c->owner)->srv;
  bool over = false;
  if (vld_shares_any_over(&srv->shares)) { /* no lock while nobody is at a share */
    lock(srv);
    over = vld_shares_over_memory(&srv->shares, c->uid);
    if (over && !c->share_paused) {
      srv->stats.share_pauses++;
      vld_log_debug("conn %llu (uid %u): not read: its user's unread responses hold its memory "
                    "share (--max-memory-per-uid)",
                    (unsigned long long)c->serial, (unsigned)c->uid);
    }
    unlock(srv);
  }
  c->share_paused = over;
  return !over;
}

static bool conn_on_unsent(vld_conn *c, uint64_t from, uint64_t to) {
  vld_server *srv = ((vld_shard *)c->owner)->srv;
  lock(srv);
  bool counted = vld_shares_add_unsent(&srv->shares, c->uid, from, to);
  unlock(srv);
  if (to == 0) {
    c->share_paused = false; /* all taken: a later pause is another */
  }
  return counted;
}

static void conn_on_yield(vld_conn *c) {
  vld_server *srv = ((vld_shard *)c->owner)->srv;
  lock(srv);
  srv->stats.yields++;
  unlock(srv);
}

static const vld_conn_callbacks conn_callbacks = {
    .on_frame = conn_on_frame,
    .on_closing = conn_on_closing,
    .on_closed = conn_on_closed,
    .on_free = conn_on_free,
    .admit_memory = conn_admit_memory,
    .on_wait_memory = conn_on_wait_memory,
    .memory_allows = conn_memory_allows,
    .on_unsent = conn_on_unsent,
    .on_stream_error = conn_on_stream_error,
    .on_yield = conn_on_yield,
};

/* ---- accepting -------------------------------------------------------------------------- *
 * The first loop accepts (accept4 on the listening socket, polled) and decides on each peer in
 * the order they connected: its credentials, the access lists, --max-connections and the
 * user's share, whose slots it takes at once. A refused peer is answered on the first loop; an
 * admitted one goes to the loop with the fewest connections (ties take turns), which serves it
 * from then on. */

enum { ACCEPT_BATCH = 64, ACCEPT_RETRY_MS = 50 };

/* Serves p on sh: a connection of sh from now on. admitted: its slots are taken (else v says
 * why it is refused). During a shutdown an admitted peer not yet served is closed unread, as if
 * never accepted. */
static void take_peer(vld_shard *sh, const vld_peer *p, bool admitted, const verdict *v) {
  vld_server *srv = sh->srv;
  lock(srv);
  bool stopping = admitted && srv->shutting_down;
  unlock(srv);
  vld_conn *c =
      stopping ? NULL : vld_conn_new(sh->loop, &srv->conn_limits, &conn_callbacks, &sh->turn, sh);
  if (c == NULL) {
    close(p->fd);
    lock(srv);
    srv->n_open--;
    if (admitted) {
      release_slot(sh, p->uid);
    }
    unlock(srv);
    if (!stopping) {
      count_refusal(srv, VLD_REFUSE_NOMEM, "out of memory: dropping a new connection");
    }
    return;
  }
  c->pid = p->pid;
  c->uid = p->uid;
  c->gid = p->gid;
  c->counted = admitted;
  link_conn(sh, c);
  int rc = uv_pipe_open(&c->pipe, p->fd);
  if (rc != 0) {
    vld_log_warn("accept: %s", uv_strerror(rc));
    close(p->fd);
    vld_conn_close(c); /* on_closed gives its places back */
    return;
  }
  if (!admitted) {
    refuse(srv, c, v);
    return;
  }
  vld_log_debug("conn %llu: uid %u pid %d connected (loop %u)", (unsigned long long)c->serial,
                (unsigned)c->uid, (int)c->pid, sh->index);
  vld_conn_start(c);
}

/* Under the lock. */
static vld_shard *pick_shard(vld_server *srv) {
  vld_shard *best = NULL;
  for (unsigned k = 0; k < srv->n_shards; k++) {
    vld_shard *sh = &srv->shards[(srv->next_shard + k) % srv->n_shards];
    if (best == NULL || sh->n_conns < best->n_conns) {
      best = sh;
    }
  }
  srv->next_shard = (best->index + 1) % srv->n_shards;
  return best;
}

/* Room in sh's queue of peers to take, under the lock; false on out-of-memory. */
static bool reserve_adopt(vld_shard *sh) {
  if (sh->n_adopt < sh->cap_adopt) {
    return true;
  }
  size_t cap = sh->cap_adopt > 0 ? sh->cap_adopt * 2 : 16;
  vld_peer *a = realloc(sh->adopt, cap * sizeof *a);
  if (a == NULL) {
    return false;
  }
  sh->adopt = a;
  sh->cap_adopt = cap;
  return true;
}

/* Decides on the peer of an accepted socket; when admitted, takes its slots and gives the loop
 * that will serve it (NULL: refused, v says why). */
static vld_shard *decide(vld_server *srv, vld_peer *p, verdict *v) {
  v->code = VL_ERR_OVERLOADED;
  if (!peer_credentials(p)) {
    *v = (verdict){VLD_REFUSE_NOT_PERMITTED, VL_ERR_NOT_PERMITTED,
                   "the peer's credentials cannot be read"};
    return NULL;
  }
  if (!permitted(srv, p)) {
    v->why = VLD_REFUSE_NOT_PERMITTED;
    v->code = VL_ERR_NOT_PERMITTED;
    snprintf(v->text, sizeof v->text, "uid %u is not permitted to use this daemon",
             (unsigned)p->uid);
    return NULL;
  }
  vld_shard *to = NULL;
  lock(srv);
  vld_uid_use *u = NULL;
  if (srv->n_conns >= srv->cfg->max_connections) {
    v->why = VLD_REFUSE_CONNECTIONS;
    snprintf(v->text, sizeof v->text, "too many connections (limit %u)", srv->cfg->max_connections);
  } else if ((u = vld_shares_find(&srv->shares, p->uid)) == NULL) {
    v->why = VLD_REFUSE_NOMEM;
    snprintf(v->text, sizeof v->text, "out of memory");
  } else if (u->conns >= srv->cfg->max_conns_per_uid) {
    vld_shares_forget(&srv->shares, u);
    v->why = VLD_REFUSE_UID;
    snprintf(v->text, sizeof v->text, "too many connections of uid %u (limit %u per user)",
             (unsigned)p->uid, srv->cfg->max_conns_per_uid);
  } else if ((to = pick_shard(srv)) != &srv->shards[0] && !reserve_adopt(to)) {
    vld_shares_forget(&srv->shares, u);
    to = NULL;
    v->why = VLD_REFUSE_NOMEM;
    snprintf(v->text, sizeof v->text, "out of memory");
  } else {
    u->conns++;
    srv->n_conns++;
    to->n_conns++;
    srv->stats.conns_total++;
    if (to != &srv->shards[0]) {
      to->adopt[to->n_adopt++] = *p;
      uv_async_send(&to->wake);
    }
  }
  unlock(srv);
  return to;
}

static void on_listen_ready(uv_poll_t *p, int status, int events);

static void on_accept_retry(uv_timer_t *t) {
  vld_server *srv = t->data;
  if (srv->listening) {
    uv_poll_start(&srv->listener, UV_READABLE, on_listen_ready);
  }
}

/* accept failed for want of a resource (EMFILE, ENFILE, ENOBUFS, ENOMEM): the socket stays
 * readable, so stop polling it a while rather than spin. */
static void pause_accepting(vld_server *srv) {
  uv_poll_stop(&srv->listener);
  uv_timer_start(&srv->accept_retry, on_accept_retry, ACCEPT_RETRY_MS, 0);
}

static void on_listen_ready(uv_poll_t *h, int status, int events) {
  vld_server *srv = h->data;
  char text[160];
  (void)events;
  if (status < 0) {
    snprintf(text, sizeof text, "accept: %s", uv_strerror(status));
    count_refusal(srv, VLD_REFUSE_ACCEPT_ERROR, text);
    pause_accepting(srv);
    return;
  }
  for (int i = 0; i < ACCEPT_BATCH; i++) {
    int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0 && (errno == EINTR || errno == ECONNABORTED)) {
      continue;
    }
    if (fd < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    }
    if (fd < 0) {
      snprintf(text, sizeof text, "accept: %s", strerror(errno));
      count_refusal(srv, VLD_REFUSE_ACCEPT_ERROR, text);
      pause_accepting(srv);
      return;
    }
    lock(srv);
    bool room = srv->n_open < srv->fd_cap;
    srv->n_open += room;
    uint32_t n_open = srv->n_open;
    unlock(srv);
    if (!room) {
      snprintf(text, sizeof text,
               "%u connections are open, as many as the file descriptor limit of %llu allows; "
               "dropping new ones unanswered",
               n_open, (unsigned long long)srv->nofile);
      count_refusal(srv, VLD_REFUSE_FD_LIMIT, text);
      close(fd);
      continue;
    }
    vld_peer peer = {.fd = fd};
    verdict v;
    vld_shard *to = decide(srv, &peer, &v);
    if (to == NULL || to == &srv->shards[0]) {
      take_peer(&srv->shards[0], &peer, to != NULL, &v);
    }
  }
}

/* ---- shutdown ------------------------------------------------------------------------- */

static void close_if_open(uv_handle_t *h) {
  if (!uv_is_closing(h)) {
    uv_close(h, NULL);
  }
}

/* The last connection of every loop is gone during a shutdown (or the start failed): close the
 * loop's handles, so that it ends; the first loop also closes the server's. */
static void finish_shard(vld_shard *sh) {
  if (sh->finished) {
    return;
  }
  sh->finished = true;
  close_if_open((uv_handle_t *)&sh->wake);
  close_if_open((uv_handle_t *)&sh->hup_probe);
  close_if_open((uv_handle_t *)&sh->kept_watch);
  close_if_open((uv_handle_t *)&sh->mem_wait);
  vld_turn_close(&sh->turn);
  if (sh->index != 0) {
    return;
  }
  vld_server *srv = sh->srv;
  close_if_open((uv_handle_t *)&srv->sigterm);
  close_if_open((uv_handle_t *)&srv->sigint);
  /* Closing the last handle of a signal gives it back its default action, which would end the
   * process by a second SIGTERM or SIGINT between here and exit (status 143, not 0): the
   * shutdown is done, so from here on they are ignored. */
  struct sigaction ign;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  (void)sigaction(SIGTERM, &ign, NULL);
  (void)sigaction(SIGINT, &ign, NULL);
  for (size_t i = 0; i < VLD_N_IGNORED_SIGNALS; i++) {
    close_if_open((uv_handle_t *)&srv->ignored[i]);
  }
  close_if_open((uv_handle_t *)&srv->drain);
  close_if_open((uv_handle_t *)&srv->watchdog);
  close_if_open((uv_handle_t *)&srv->accept_retry);
  vld_log_info("stopped");
}

static void close_all(vld_shard *sh) {
  for (vld_conn *c = sh->conns; c != NULL; c = c->next) {
    vld_conn_close(c);
  }
}

static void drain_shard(vld_shard *sh) {
  for (vld_conn *c = sh->conns; c != NULL;) {
    vld_conn *next = c->next; /* drain may close c, never free it: its handles hold a ref */
    vld_conn_drain(c);
    c = next;
  }
}

/* The drain took too long. Connections with nothing on the pool (a half-received frame, or
 * responses their client does not read) are closed. Requests still queued are answered -32007
 * rather than run; running ones finish and are answered (the process could not exit before
 * they end anyway), after which their connections close as they drain, or at their idle
 * timeout if the client stops reading. */
static void expire_shard(vld_shard *sh) {
  for (vld_conn *c = sh->conns; c != NULL;) {
    vld_conn *next = c->next; /* closing never frees c: its handles hold a ref */
    bool answered = vld_conn_drain_pending(c);
    if (answered) {
      /* a frame begun before the stop signal, not yet whole: -32007, then the close */
      vld_conn_drain_expired(c);
    }
    if (c->inflight > 0) {
      vld_dispatch_expire(c);
    } else if (!answered) {
      vld_conn_close(c);
    }
    c = next;
  }
}

static void on_drain_timeout(uv_timer_t *t) {
  vld_server *srv = t->data;
  lock(srv);
  vld_log_warn("drain timeout of %llu ms: %u connections, %u requests in flight; queued requests "
               "are answered -32007, running ones finish",
               (unsigned long long)srv->cfg->drain_timeout_ms, srv->n_conns, srv->pool_queued);
  post_locked(srv, CMD_EXPIRE);
  unlock(srv);
}

/* Commands from the first loop, and sockets to take. */
static void on_wake(uv_async_t *a) {
  vld_shard *sh = a->data;
  vld_server *srv = sh->srv;
  lock(srv);
  vld_peer *peers = sh->adopt;
  size_t n = sh->n_adopt;
  sh->adopt = NULL;
  sh->n_adopt = sh->cap_adopt = 0;
  bool drain = sh->cmd_drain, all = sh->cmd_close_all, expire = sh->cmd_expire;
  bool fin = sh->cmd_finish;
  sh->cmd_drain = sh->cmd_close_all = sh->cmd_expire = sh->cmd_finish = false;
  unlock(srv);
  for (size_t i = 0; i < n; i++) {
    take_peer(sh, &peers[i], true, NULL);
  }
  free(peers);
  if (drain) {
    drain_shard(sh);
    finish_if_done(srv);
  }
  if (all) {
    close_all(sh);
  }
  if (expire) {
    expire_shard(sh);
  }
  if (fin) {
    finish_shard(sh);
  }
}

/* Is the file at our socket path still the socket we bound? Its device and inode must match,
 * and (inode numbers are reused at once on ext4) whoever listens there must be this process:
 * SO_PEERCRED of a connection tells the listener's pid. When nobody can be asked (the backlog
 * is full), the change time recorded after bind decides. Called while still listening. */
static bool path_is_ours(const vld_server *srv) {
  struct stat st;
  if (lstat(srv->socket_path, &st) != 0 || st.st_dev != srv->socket_dev ||
      st.st_ino != srv->socket_ino) {
    return false;
  }
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  memcpy(sa.sun_path, srv->socket_path, strlen(srv->socket_path) + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  struct ucred cred;
  socklen_t len = sizeof cred;
  int asked = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
              getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0;
  if (fd >= 0) {
    close(fd);
  }
  if (asked) {
    return cred.pid == getpid();
  }
  return st.st_ctim.tv_sec == srv->socket_ctime.tv_sec &&
         st.st_ctim.tv_nsec == srv->socket_ctime.tv_nsec;
}

static void stop_listening(vld_server *srv) {
  if (srv->listening) {
    srv->listening = false;
    uv_close((uv_handle_t *)&srv->listener, NULL);
    uv_timer_stop(&srv->accept_retry);
  }
  /* New clients fail fast instead of queueing. Only the file we bound: another daemon may have
   * bound a new socket at the path since ours was removed. */
  if (srv->socket_path[0] != '\0' && srv->listen_fd >= 0 && path_is_ours(srv)) {
    unlink(srv->socket_path);
  }
  if (srv->listen_fd >= 0) {
    close(srv->listen_fd);
    srv->listen_fd = -1;
  }
  unlock_path(srv);
}

void vld_server_shutdown(vld_server *srv) {
  lock(srv);
  bool again = srv->shutting_down;
  srv->shutting_down = true;
  uint32_t conns = srv->n_conns, queued = srv->pool_queued;
  unlock(srv);
  if (again) {
    vld_log_warn("second stop signal: closing every connection now");
    post_all(srv, CMD_CLOSE_ALL);
    return;
  }
  char status[96];
  snprintf(status, sizeof status, "STOPPING=1\nSTATUS=draining %u requests", queued);
  vld_systemd_notify(status);
  vld_log_info("stopping: %u connections, %u requests in flight", conns, queued);
  stop_listening(srv);
  uv_timer_start(&srv->drain, on_drain_timeout, srv->cfg->drain_timeout_ms, 0);
  post_all(srv, CMD_DRAIN);
  finish_if_done(srv);
}

static void on_signal(uv_signal_t *s, int signum) {
  vld_log_info("received %s", signum == SIGTERM ? "SIGTERM" : "SIGINT");
  vld_server_shutdown(s->data);
}

/* SIGHUP, SIGUSR1 and SIGUSR2 would end the process (their default action) with requests in
 * flight unanswered. There is nothing to reload or reopen (no configuration file; logs go to
 * stderr), so they are logged and ignored. */
static const int ignored_signals[VLD_N_IGNORED_SIGNALS] = {SIGHUP, SIGUSR1, SIGUSR2};

static void on_ignored_signal(uv_signal_t *s, int signum) {
  (void)s;
  vld_log_info("received %s: ignored (nothing to reload; stop with SIGTERM)",
              signum == SIGHUP ? "SIGHUP" : signum == SIGUSR1 ? "SIGUSR1" : "SIGUSR2");
}

/* No work on the pool, and none queued on any loop for the last KEEP_IDLE_PROBES probes. */
static bool daemon_idle_for_a_second(vld_server *srv) {
  const uint64_t second_ns = (uint64_t)KEEP_IDLE_PROBES * HUP_PROBE_MS * 1000000u;
  uint64_t last = atomic_load_explicit(&srv->last_work_ns, memory_order_relaxed);
  lock(srv);
  bool idle = srv->pool_queued == 0 && uv_hrtime() - last >= second_ns;
  unlock(srv);
  return idle;
}

/* ---- the idle trim ---------------------------------------------------------------------
 * When a loop's pool goes idle the heap's free pages go back to the system (on_hup_probe). The
 * trim walks the heap: 10-13 ms for 64 MiB of small blocks, half of them freed, and on the loop
 * that stalled its small requests (answered there) once per busy-to-idle transition. So it
 * runs on a worker, one at a time for the whole daemon. Asked for while one is queued, that one
 * serves (it has not started walking); asked for while one runs, it runs once more when done,
 * since what was freed meanwhile may lie behind its walk. The loop that queued it does not end
 * before its after-callback (a uv_work_t keeps its loop running), so a shutdown waits for it. */
enum { TRIM_OUT = 1 /* queued or running */, TRIM_AGAIN = 2 /* asked for again since it began */ };

static void queue_idle_trim(vld_server *srv, uv_loop_t *loop);

/* On a worker. What was asked for before the walk begins is covered by it. */
static void idle_trim_work(uv_work_t *req) {
  vld_server *srv = req->data;
  atomic_fetch_and_explicit(&srv->idle_trim_state, ~(unsigned)TRIM_AGAIN, memory_order_acq_rel);
  uint64_t t0 = uv_hrtime();
  vld_mem_trim();
  vld_log_debug("the pool went idle: heap trimmed in %.3f ms on worker thread %ld",
                (double)(uv_hrtime() - t0) / 1e6, (long)gettid());
}

/* On the loop that queued it: done, or once more if asked for while it ran. */
static void idle_trim_done(uv_work_t *req, int status) {
  (void)status; /* never cancelled */
  vld_server *srv = req->data;
  uv_loop_t *loop = req->loop;
  unsigned s = atomic_load_explicit(&srv->idle_trim_state, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(&srv->idle_trim_state, &s,
                                                (s & TRIM_AGAIN) != 0 ? TRIM_OUT : 0,
                                                memory_order_acq_rel, memory_order_relaxed)) {
  }
  if ((s & TRIM_AGAIN) != 0) {
    queue_idle_trim(srv, loop);
  }
}

/* The caller set TRIM_OUT: the request is its own until idle_trim_done clears it. */
static void queue_idle_trim(vld_server *srv, uv_loop_t *loop) {
  srv->idle_trim.data = srv;
  int rc = uv_queue_work(loop, &srv->idle_trim, idle_trim_work, idle_trim_done);
  if (rc != 0) {
    atomic_store_explicit(&srv->idle_trim_state, 0, memory_order_release);
    vld_log_warn("cannot queue the heap trim: %s", uv_strerror(rc));
  }
}

/* The pool of sh went idle: a trim is queued on its loop, unless one is out already. */
static void ask_idle_trim(vld_shard *sh) {
  vld_server *srv = sh->srv;
  unsigned s = atomic_load_explicit(&srv->idle_trim_state, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(&srv->idle_trim_state, &s,
                                                (s & TRIM_OUT) != 0 ? s | TRIM_AGAIN : TRIM_OUT,
                                                memory_order_acq_rel, memory_order_relaxed)) {
  }
  if ((s & TRIM_OUT) == 0) {
    queue_idle_trim(srv, sh->loop);
  }
}

/* A connection that is not being read (over its limits, or after a half-close) would notice
 * its peer leaving only when a response fails to be written, after all its queued work ran
 * for nobody. So while work of this loop is on the pool, look for hung-up peers of such
 * connections. */
static void on_hup_probe(uv_timer_t *t) {
  vld_shard *sh = t->data;
  for (vld_conn *c = sh->conns; c != NULL; c = c->next) {
    if (c->inflight > 0 && !c->reading) {
      vld_conn_probe_hangup(c); /* may close c, never frees it: its handles hold a ref */
    }
  }
  if (sh->dispatch.inflight > 0) {
    sh->idle_probes = 0;
    return;
  }
  if (sh->idle_probes++ == 0) {
    /* The pool just went idle: the heap's free pages go back to the system. Tensor buffers of
     * a burst leave the heap fragmented at its high-water mark, which a daemon that idles
     * between bursts would otherwise keep resident. At most once per busy-to-idle transition
     * (>= HUP_PROBE_MS apart), never under steady load; on a worker (ask_idle_trim). */
    ask_idle_trim(sh);
  }
  if (sh->idle_probes >= KEEP_IDLE_PROBES) {
    /* A second idle: the large blocks kept for the next large request go back too, once the
     * whole daemon has been idle that long; while another loop is busy, its probe, which runs
     * until it has been idle for a second itself, decides instead (a client sending one blob
     * after another, on any loop, keeps them). */
    uv_timer_stop(t);
    sh->idle_probes = 0;
    if (daemon_idle_for_a_second(sh->srv)) {
      vld_mem_release_kept();
    }
  }
}

/* This loop's connections paused for memory (their next frame, or the whole daemon over the
 * budget) get another try as memory is released; the timer stops once none of them waits. */
static void on_mem_wait(uv_timer_t *t) {
  vld_shard *sh = t->data;
  vld_server *srv = sh->srv;
  /* Waiting connections whose peer left close (and leave the queue); a refused one leaves it. */
  for (vld_conn *c = sh->conns; c != NULL; c = c->next) {
    if (c->mem_queued && c->input_done) {
      lock(srv);
      mem_dequeue(srv, c);
      unlock(srv);
    } else if (c->mem_queued) {
      vld_conn_probe_hangup(c); /* may close c (on_closing dequeues it), never frees it */
    }
  }
  /* Admit from the head while frames fit and the head is ours: each settle asks for its frame's
   * memory again. Another loop's head is that loop's to admit. */
  for (;;) {
    lock(srv);
    vld_conn *c = srv->mem_head;
    bool ours = c != NULL && c->owner == sh;
    unlock(srv);
    if (!ours) {
      break;
    }
    vld_conn_settle(c);
    lock(srv);
    bool stuck = srv->mem_head == c;
    unlock(srv);
    if (stuck) {
      break; /* it still does not fit: nobody behind it goes first */
    }
  }
  bool waiting = false;
  for (vld_conn *c = sh->conns; c != NULL; c = c->next) {
    if (c->mem_queued) {
      waiting = true;
    } else if (!c->reading && !c->closing) {
      vld_conn_settle(c); /* may close c, never frees it: its handles hold a ref */
      waiting |= !c->closing && (c->mem_queued || (c->writes > 0 && !conn_memory_allows(c)));
    }
  }
  if (!waiting) {
    uv_timer_stop(t);
  }
}

static void watch_memory(vld_shard *sh) {
  if (!sh->finished && !uv_is_active((uv_handle_t *)&sh->mem_wait)) {
    uv_timer_start(&sh->mem_wait, on_mem_wait, MEM_WAIT_MS, MEM_WAIT_MS);
  }
}

static void watch_hangups(vld_shard *sh) {
  sh->idle_probes = 0; /* work again: the pool's idle second starts over */
  if (!sh->finished && !uv_is_active((uv_handle_t *)&sh->hup_probe)) {
    uv_timer_start(&sh->hup_probe, on_hup_probe, HUP_PROBE_MS, HUP_PROBE_MS);
  }
}

/* Before each wait of the loop: a large block can be kept long after the pool went idle and the
 * probe stopped (the answers of a client that never read them, freed when it leaves; a response
 * written a second after its work), and would then stay mapped until the next large request.
 * So while blocks are kept the probe runs, and they go back after the daemon's idle second
 * (on_hup_probe); a probe already running keeps its count. */
static void on_kept_watch(uv_prepare_t *p) {
  vld_shard *sh = p->data;
  if (vld_mem_kept() > 0 && !uv_is_active((uv_handle_t *)&sh->hup_probe)) {
    watch_hangups(sh);
  }
}

static void on_watchdog(uv_timer_t *t) {
  (void)t;
  vld_systemd_notify("WATCHDOG=1");
}

/* ---- the dispatcher's callbacks ------------------------------------------------------- */

static void on_work_queued(void *owner) {
  vld_shard *sh = owner;
  atomic_store_explicit(&sh->srv->last_work_ns, uv_hrtime(), memory_order_relaxed);
  watch_hangups(sh);
}

/* The "stats" method: the counters and what only the server knows. */
static cJSON *stats_result(void *owner) {
  vld_server *srv = ((vld_shard *)owner)->srv;
  const char *names[VLD_STATS_MAX_METHODS];
  size_t n = vld_dispatch_method_count();
  n = n < VLD_STATS_MAX_METHODS ? n : VLD_STATS_MAX_METHODS;
  for (size_t i = 0; i < n; i++) {
    names[i] = vld_dispatch_method_name(i);
  }
  /* The counters are copied under the lock, which every loop takes to count each request, and
   * printed outside it. */
  vld_stats *copy = malloc(sizeof *copy);
  if (copy == NULL) {
    return NULL;
  }
  lock(srv);
  *copy = srv->stats;
  vld_stats_view v = {.method_names = names,
                      .n_methods = n,
                      .conns_current = srv->n_conns,
                      .conns_waiting_for_memory = srv->n_mem_waiting,
                      .requests_in_flight = srv->pool_queued,
                      .now_ns = uv_hrtime(),
                      .open_files_limit = srv->nofile,
                      .memory_budget = vld_mem_budget(),
                      .memory_in_use = vld_mem_in_use(),
                      .memory_peak = vld_mem_peak(),
                      .memory_kept = vld_mem_kept(),
                      .memory_unsent = vld_shares_unsent(&srv->shares),
                      .memory_share_per_uid = srv->shares.unsent_share};
  unlock(srv);
  cJSON *result = vld_stats_to_json(copy, &v);
  free(copy);
  return result;
}

/* ---- start ---------------------------------------------------------------------------- */

static int start_listening(vld_server *srv) {
  int fd = vld_systemd_listen_fd();
  if (fd == -2) {
    return -1;
  }
  if (fd >= 0) {
    srv->listen_fd = fd;
    vld_log_info("using the socket passed by systemd (fd %d)", fd);
  } else if (bind_path(srv) != 0) {
    return -1;
  }
  /* non-blocking: a peer that leaves between the poll and accept must not block the loop */
  int flags = fcntl(srv->listen_fd, F_GETFL);
  int rc = flags >= 0 && fcntl(srv->listen_fd, F_SETFL, flags | O_NONBLOCK) == 0 ? 0 : -errno;
  if (rc == 0) {
    rc = uv_poll_init(srv->loop, &srv->listener, srv->listen_fd);
  }
  if (rc == 0) {
    srv->listener.data = srv;
    srv->listening = true;
    rc = uv_poll_start(&srv->listener, UV_READABLE, on_listen_ready);
  }
  unlock_path(srv); /* listening (or failed): the next daemon's probe sees which */
  if (rc != 0) {
    vld_log_error("cannot listen: %s", uv_strerror(rc));
    return -1;
  }
  return 0;
}

static void start_handles(vld_server *srv) {
  uv_signal_init(srv->loop, &srv->sigterm);
  uv_signal_init(srv->loop, &srv->sigint);
  for (size_t i = 0; i < VLD_N_IGNORED_SIGNALS; i++) {
    uv_signal_init(srv->loop, &srv->ignored[i]);
  }
  uv_timer_init(srv->loop, &srv->drain);
  uv_timer_init(srv->loop, &srv->watchdog);
  uv_timer_init(srv->loop, &srv->accept_retry);
  srv->sigterm.data = srv;
  srv->sigint.data = srv;
  srv->drain.data = srv;
  srv->watchdog.data = srv;
  srv->accept_retry.data = srv;
  uint64_t usec = vld_systemd_watchdog_usec();
  if (usec > 0) {
    uint64_t ms = usec / 2000 > 0 ? usec / 2000 : 1;
    uv_timer_start(&srv->watchdog, on_watchdog, ms, ms);
    vld_log_info("watchdog: pinging every %llu ms", (unsigned long long)ms);
  }
}

/* File descriptors open now (the loop's, stdio, a socket passed by systemd). */
static unsigned fds_open(void) {
  DIR *d = opendir("/proc/self/fd");
  unsigned n = 0;
  if (d == NULL) {
    return 16; /* a generous guess */
  }
  while (readdir(d) != NULL) {
    n++;
  }
  closedir(d);
  return n > 3 ? n - 3 : n; /* ".", ".." and the directory's own fd */
}

/* Raises the soft RLIMIT_NOFILE to what --max-connections needs (as far as the hard limit
 * allows) and caps open connections below it, so accept never runs out of descriptors. Each
 * further loop holds a few descriptors of its own (epoll, its wake-up eventfd). */
static void size_fd_limit(vld_server *srv, unsigned loops) {
  struct rlimit rl;
  uint64_t base = (uint64_t)fds_open() + FD_RESERVE + (uint64_t)FD_PER_LOOP * loops;
  uint64_t need = base + FD_REFUSING + srv->cfg->max_connections;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
    rl.rlim_cur = rl.rlim_max = 1024;
  }
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
    struct rlimit want = rl;
    want.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &want) == 0) {
      rl = want;
    }
  }
  srv->nofile = rl.rlim_cur == RLIM_INFINITY ? need : (uint64_t)rl.rlim_cur;
  uint64_t cap = srv->nofile > base ? srv->nofile - base : 1;
  srv->fd_cap = cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
  if (srv->nofile < need) {
    vld_log_warn("the file descriptor limit is %llu (hard limit %llu): --max-connections %u needs "
                "%llu; at most %u connections (refused ones included) will be open",
                (unsigned long long)srv->nofile, (unsigned long long)rl.rlim_max,
                srv->cfg->max_connections, (unsigned long long)need, srv->fd_cap);
  }
}

static int start_signals(vld_server *srv) {
  if (uv_signal_start(&srv->sigterm, on_signal, SIGTERM) != 0 ||
      uv_signal_start(&srv->sigint, on_signal, SIGINT) != 0) {
    return -1;
  }
  for (size_t i = 0; i < VLD_N_IGNORED_SIGNALS; i++) {
    if (uv_signal_start(&srv->ignored[i], on_ignored_signal, ignored_signals[i]) != 0) {
      return -1;
    }
  }
  return 0;
}

static int init_shard(vld_server *srv, unsigned i, uv_loop_t *loop) {
  vld_shard *sh = &srv->shards[i];
  sh->srv = srv;
  sh->index = i;
  sh->loop = loop;
  int rc = uv_async_init(loop, &sh->wake, on_wake);
  if (rc != 0) {
    return rc;
  }
  sh->wake.data = sh;
  /* libuv keeps a descriptor per loop (/dev/null, given up to accept past EMFILE) from the loop's
   * first stream on: opened now, the descriptors open after start are the daemon's baseline. */
  uv_pipe_init(loop, &sh->first_stream, 0);
  uv_close((uv_handle_t *)&sh->first_stream, NULL);
  uv_timer_init(loop, &sh->hup_probe);
  uv_timer_init(loop, &sh->mem_wait);
  uv_prepare_init(loop, &sh->kept_watch);
  sh->hup_probe.data = sh;
  sh->mem_wait.data = sh;
  sh->kept_watch.data = sh;
  uv_prepare_start(&sh->kept_watch, on_kept_watch);
  vld_turn_init(&sh->turn, loop);
  uv_unref((uv_handle_t *)&sh->kept_watch); /* it never keeps the loop running by itself */
  sh->dispatch = (vld_dispatcher){.loop = loop,
                                  .cfg = srv->cfg,
                                  .mu = &srv->mu,
                                  .stats = &srv->stats,
                                  .shares = &srv->shares,
                                  .pool_queued = &srv->pool_queued,
                                  .owner = sh,
                                  .on_queued = on_work_queued,
                                  .stats_result = stats_result};
  return 0;
}

static void shard_main(void *arg) {
  vld_shard *sh = arg;
  char name[16];
  snprintf(name, sizeof name, "viewlowerd-l%u", sh->index);
  pthread_setname_np(pthread_self(), name);
  vld_mem_cache_begin();
  uv_sem_post(&sh->srv->shard_started); /* named and running */
  uv_run(sh->loop, UV_RUN_DEFAULT);
  vld_mem_cache_end();
}

/* Starts the loops past the first, each on a thread with the main thread's stack size (a
 * small request runs on its loop); fewer, with a warning, when one cannot start. */
static void start_shards(vld_server *srv, unsigned want) {
  uv_thread_options_t opt = {.flags = UV_THREAD_HAS_STACK_SIZE, .stack_size = LOOP_STACK};
  if (want > 1 && uv_sem_init(&srv->shard_started, 0) != 0) {
    vld_log_warn("cannot start further event loops: no semaphore");
    return;
  }
  for (unsigned i = 1; i < want; i++) {
    vld_shard *sh = &srv->shards[i];
    if (uv_loop_init(&sh->own_loop) != 0) {
      break;
    }
    if (init_shard(srv, i, &sh->own_loop) != 0) {
      uv_loop_close(&sh->own_loop);
      break;
    }
    lock(srv);
    srv->n_shards = i + 1;
    unlock(srv);
    if (uv_thread_create_ex(&sh->thread, &opt, shard_main, sh) != 0) {
      lock(srv);
      srv->n_shards = i;
      unlock(srv);
      finish_shard(sh);
      uv_run(&sh->own_loop, UV_RUN_DEFAULT);
      uv_loop_close(&sh->own_loop);
      break;
    }
    sh->thread_started = true;
    uv_sem_wait(&srv->shard_started);
  }
  if (want > 1) {
    uv_sem_destroy(&srv->shard_started);
  }
  if (srv->n_shards < want) {
    vld_log_warn("started %u of %u event loops", srv->n_shards, want);
  }
}

int vld_server_start(vld_server *srv, uv_loop_t *loop, const vld_config *cfg) {
  memset(srv, 0, sizeof *srv);
  srv->loop = loop;
  srv->cfg = cfg;
  srv->lock_fd = -1;
  srv->listen_fd = -1;
  srv->self_uid = geteuid();
  if (uv_mutex_init_recursive(&srv->mu) != 0) {
    vld_log_error("cannot create a mutex");
    return -1;
  }
  srv->mu_ready = true;
  srv->conn_limits = (vld_conn_limits){.max_frame_bytes = cfg->max_frame_bytes,
                                       .max_inflight = cfg->max_inflight,
                                       .max_write_queue = cfg->max_write_queue,
                                       .idle_timeout_ms = cfg->idle_timeout_ms};
  vld_stats_init(&srv->stats, uv_hrtime());
  /* the share of each user's unread responses: half the budget unless given */
  srv->shares.unsent_share =
      cfg->max_memory_per_uid > 0 ? cfg->max_memory_per_uid : vld_mem_budget() / 2;
  unsigned loops = vld_config_loops(cfg);
  if (init_shard(srv, 0, loop) != 0) {
    vld_log_error("cannot set up the event loop");
    return -1;
  }
  srv->n_shards = 1;
  start_handles(srv);
  size_fd_limit(srv, loops);
  /* every loop runs before the socket accepts: a client that connects finds the daemon whole */
  bool signals = start_signals(srv) == 0;
  if (signals) {
    start_shards(srv, loops);
  }
  if (!signals || start_listening(srv) != 0) {
    stop_listening(srv);
    srv->shutting_down = true;
    post_all(srv, CMD_FINISH);
    finish_shard(&srv->shards[0]);
    return -1;
  }
  char status[160];
  snprintf(status, sizeof status, "READY=1\nSTATUS=listening on %s",
           srv->socket_path[0] != '\0' ? srv->socket_path : "the socket passed by systemd");
  vld_systemd_notify(status);
  vld_log_info("listening on %s (%u event loops, %u workers, max %u connections, max %u queued, "
               "%llu bytes of unread responses per user)",
               srv->socket_path[0] != '\0' ? srv->socket_path : "the socket passed by systemd",
               srv->n_shards, cfg->workers, cfg->max_connections, cfg->max_queued,
               (unsigned long long)srv->shares.unsent_share);
  return 0;
}

void vld_server_join(vld_server *srv) {
  for (unsigned i = 1; i < srv->n_shards; i++) {
    vld_shard *sh = &srv->shards[i];
    if (sh->thread_started) {
      uv_thread_join(&sh->thread);
      int rc = uv_loop_close(&sh->own_loop);
      if (rc != 0) {
        vld_log_error("uv_loop_close (loop %u): %s", i, uv_strerror(rc));
      }
    }
  }
  for (unsigned i = 0; i < srv->n_shards; i++) {
    vld_shard *sh = &srv->shards[i];
    for (size_t k = 0; k < sh->n_adopt; k++) {
      close(sh->adopt[k].fd);
    }
    free(sh->adopt);
    sh->adopt = NULL;
    sh->n_adopt = sh->cap_adopt = 0;
  }
  vld_shares_free(&srv->shares);
  if (srv->mu_ready) {
    uv_mutex_destroy(&srv->mu);
    srv->mu_ready = false;
  }
}
