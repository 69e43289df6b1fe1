/* server.c - the listening socket, admission of connections, signals, watchdog and the
 * graceful shutdown of viewlowerd (SPEC §7).
 *
 * Socket: taken from systemd socket activation when passed, else created at the path
 * resolved as SPEC §7 says. An existing socket file is probed: if a daemon answers, starting
 * fails; if nobody listens it is stale and replaced. The socket is bound under a umask that
 * leaves it private, then given --socket-mode.
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
#include <malloc.h>
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
/* File descriptors kept free beyond the connections: the loop's own, the spare that drops a
 * connection, logs and sd_notify. Connections are capped below the soft RLIMIT_NOFILE by this
 * much, so accept never meets EMFILE (where libuv would drop connections without a word). */
enum { FD_RESERVE = 32, FD_REFUSING = 64 /* room for refused peers being answered */ };

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
  rc = uv_pipe_open(&srv->listener, fd);
  if (rc != 0) {
    vld_log_error("cannot use the socket %s: %s", path, uv_strerror(rc));
    close(fd);
    return -1;
  }
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
static bool peer_credentials(vld_conn *c) {
  uv_os_fd_t fd;
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (uv_fileno((uv_handle_t *)&c->pipe, &fd) != 0 ||
      getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return false;
  }
  c->pid = cred.pid;
  c->uid = cred.uid;
  c->gid = cred.gid;
  return true;
}

/* A peer is let in when its uid is ours or listed, or its primary group (SO_PEERCRED) or one
 * of its supplementary groups (SO_PEERGROUPS, Linux >= 4.13) is listed: `usermod -aG viewlower
 * USER` adds a supplementary group. The group list is read only when --allow-gid is given and
 * the uid and primary gid did not already decide; a list that cannot be read admits nobody by
 * it. It holds at most NGROUPS_MAX (65536) entries, so its buffer is bounded. */
static bool permitted(const vld_server *srv, const vld_conn *c) {
  const vld_config *cfg = srv->cfg;
  if (c->uid == srv->self_uid || listed(cfg->allow_uid, cfg->n_allow_uid, c->uid) ||
      listed(cfg->allow_gid, cfg->n_allow_gid, c->gid)) {
    return true;
  }
  uv_os_fd_t fd;
  if (cfg->n_allow_gid == 0 || uv_fileno((const uv_handle_t *)&c->pipe, &fd) != 0) {
    return false;
  }
  gid_t small[64];
  gid_t *groups = small;
  socklen_t len = sizeof small;
  int rc = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len);
  if (rc != 0 && errno == ERANGE && len <= 65536 * sizeof(gid_t) &&
      (groups = malloc(len)) != NULL) {
    rc = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len);
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
  srv->stats.conns_rejected++;
  srv->stats.refused[why]++;
  vld_log_limited(&srv->refusal_log[why], VLD_LOG_WARN, "refusing connections (%s): %s",
                  vld_refusal_names[why], text);
}

static void refuse(vld_server *srv, vld_conn *c, vld_refusal why, vl_status code, const char *text) {
  vl_error err;
  vl_error_set(&err, code, "", "%s", text);
  count_refusal(srv, why, text);
  vld_log_debug("conn %llu (uid %u, gid %u, pid %d) refused: %s", (unsigned long long)c->serial,
               (unsigned)c->uid, (unsigned)c->gid, (int)c->pid, text);
  vld_conn_refuse(c, &err);
}

static void admit(vld_server *srv, vld_conn *c) {
  char why[128];
  if (!peer_credentials(c)) {
    refuse(srv, c, VLD_REFUSE_NOT_PERMITTED, VL_ERR_NOT_PERMITTED,
           "the peer's credentials cannot be read");
    return;
  }
  if (!permitted(srv, c)) {
    snprintf(why, sizeof why, "uid %u is not permitted to use this daemon", (unsigned)c->uid);
    refuse(srv, c, VLD_REFUSE_NOT_PERMITTED, VL_ERR_NOT_PERMITTED, why);
    return;
  }
  if (srv->n_conns >= srv->cfg->max_connections) {
    snprintf(why, sizeof why, "too many connections (limit %u)", srv->cfg->max_connections);
    refuse(srv, c, VLD_REFUSE_CONNECTIONS, VL_ERR_OVERLOADED, why);
    return;
  }
  vld_uid_use *u = vld_shares_find(&srv->shares, c->uid);
  if (u == NULL) {
    refuse(srv, c, VLD_REFUSE_NOMEM, VL_ERR_OVERLOADED, "out of memory");
    return;
  }
  if (u->conns >= srv->cfg->max_conns_per_uid) {
    snprintf(why, sizeof why, "too many connections of uid %u (limit %u per user)",
             (unsigned)c->uid, srv->cfg->max_conns_per_uid);
    vld_shares_forget(&srv->shares, u);
    refuse(srv, c, VLD_REFUSE_UID, VL_ERR_OVERLOADED, why);
    return;
  }
  u->conns++;
  c->counted = true;
  srv->n_conns++;
  srv->stats.conns_total++;
  vld_log_debug("conn %llu: uid %u pid %d connected", (unsigned long long)c->serial,
               (unsigned)c->uid, (int)c->pid);
  vld_conn_start(c);
}

static void drop_connection(vld_server *srv);

static void on_spare_closed(uv_handle_t *h) {
  vld_server *srv = h->data;
  srv->spare_busy = false;
  if (srv->accept_pending && srv->listening) {
    drop_connection(srv); /* libuv holds that connection and pauses accepting until taken */
  }
}

/* Without memory for a connection, accept it into the spare handle and close it at once, so
 * that the listener keeps going. */
static void drop_connection(vld_server *srv) {
  if (srv->spare_busy) {
    srv->accept_pending = true;
    return;
  }
  srv->accept_pending = false;
  uv_pipe_init(srv->loop, &srv->spare, 0);
  srv->spare.data = srv;
  srv->spare_busy = true;
  uv_accept((uv_stream_t *)&srv->listener, (uv_stream_t *)&srv->spare);
  uv_close((uv_handle_t *)&srv->spare, on_spare_closed);
}

/* ---- the connections' callbacks ------------------------------------------------------- */

static void link_conn(vld_server *srv, vld_conn *c) {
  c->serial = ++srv->next_serial;
  c->next = srv->conns;
  if (srv->conns != NULL) {
    srv->conns->prev = c;
  }
  srv->conns = c;
  srv->n_open++;
}

static void conn_on_frame(vld_conn *c, vl_frame *frame) {
  vld_server *srv = c->owner;
  vld_dispatch_frame(&srv->dispatch, c, frame);
}

/* ---- the memory queue ------------------------------------------------------------------ *
 * A frame that does not fit the budget waits, unread, in a queue; frames are admitted from its
 * head as memory frees (the mem_wait timer, every MEM_WAIT_MS), and a frame never overtakes one
 * that waits, so a large frame is not starved by smaller ones. The order is fair across users
 * (start-time fair queueing): a user's next waiting frame gets the ticket after both the last
 * admitted one and that user's previous one, so a user with ten waiting connections and a user
 * with one take turns rather than the ten going first. Equal tickets keep arrival order. */

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
  c->mem_since_ms = uv_now(srv->loop);
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
  vld_server *srv = c->owner;
  if (!c->mem_queued) {
    if (srv->mem_head == NULL && vld_mem_fits(bytes)) {
      return true;
    }
    mem_enqueue(srv, c);
  }
  if (srv->mem_head != c || !vld_mem_fits(bytes)) {
    return false;
  }
  mem_dequeue(srv, c);
  srv->mem_vtime = c->mem_ticket;
  srv->stats.memory_waits_admitted++;
  return true;
}

static void conn_on_closing(vld_conn *c) {
  mem_dequeue(c->owner, c);
  vld_dispatch_cancel(c);
}

/* The socket is closed: its descriptor and its connection slot (and its user's) are free, even
 * while running work still holds c (that work will not be answered). */
static void conn_on_closed(vld_conn *c) {
  vld_server *srv = c->owner;
  srv->n_open--;
  if (c->counted) {
    c->counted = false;
    srv->n_conns--;
    vld_uid_use *u = vld_shares_find(&srv->shares, c->uid); /* present: it counts c */
    if (u != NULL) {
      u->conns--;
      vld_shares_forget(&srv->shares, u);
    }
  }
}

static void finish_if_done(vld_server *srv);
static void watch_memory(vld_server *srv);
static void watch_hangups(vld_server *srv);

static void conn_on_free(vld_conn *c) {
  vld_server *srv = c->owner;
  if (c->prev != NULL) {
    c->prev->next = c->next;
  } else {
    srv->conns = c->next;
  }
  if (c->next != NULL) {
    c->next->prev = c->prev;
  }
  finish_if_done(srv);
}

static void conn_on_wait_memory(vld_conn *c) {
  watch_memory(c->owner);
}

static void conn_on_stream_error(vld_conn *c, const vl_error *err) {
  vld_server *srv = c->owner;
  if (err->code == VL_ERR_OVERLOADED) {
    srv->stats.shed[VLD_SHED_MEMORY]++; /* a frame that can never fit the budget */
  }
}

static const vld_conn_callbacks conn_callbacks = {
    .on_frame = conn_on_frame,
    .on_closing = conn_on_closing,
    .on_closed = conn_on_closed,
    .on_free = conn_on_free,
    .admit_memory = conn_admit_memory,
    .on_wait_memory = conn_on_wait_memory,
    .on_stream_error = conn_on_stream_error,
};

static void on_connection(uv_stream_t *listener, int status) {
  vld_server *srv = listener->data;
  char text[160];
  if (status < 0) {
    snprintf(text, sizeof text, "accept: %s", uv_strerror(status));
    count_refusal(srv, VLD_REFUSE_ACCEPT_ERROR, text);
    return;
  }
  if (srv->n_open >= srv->fd_cap) {
    snprintf(text, sizeof text,
             "%u connections are open, as many as the file descriptor limit of %llu allows; "
             "dropping new ones unanswered",
             srv->n_open, (unsigned long long)srv->nofile);
    count_refusal(srv, VLD_REFUSE_FD_LIMIT, text);
    drop_connection(srv);
    return;
  }
  vld_conn *c = vld_conn_new(srv->loop, &srv->conn_limits, &conn_callbacks, srv);
  if (c != NULL) {
    link_conn(srv, c);
  }
  if (c == NULL) {
    count_refusal(srv, VLD_REFUSE_NOMEM, "out of memory: dropping a new connection");
    drop_connection(srv);
    return;
  }
  int rc = uv_accept(listener, (uv_stream_t *)&c->pipe);
  if (rc != 0) {
    vld_log_warn("accept: %s", uv_strerror(rc));
    vld_conn_close(c);
    return;
  }
  admit(srv, c);
}

/* ---- shutdown ------------------------------------------------------------------------- */

static void close_if_open(uv_handle_t *h) {
  if (!uv_is_closing(h)) {
    uv_close(h, NULL);
  }
}

/* The last connection is gone during a shutdown: close the server's own handles. */
static void finish(vld_server *srv) {
  if (srv->finished) {
    return;
  }
  srv->finished = true;
  close_if_open((uv_handle_t *)&srv->sigterm);
  close_if_open((uv_handle_t *)&srv->sigint);
  for (size_t i = 0; i < VLD_N_IGNORED_SIGNALS; i++) {
    close_if_open((uv_handle_t *)&srv->ignored[i]);
  }
  close_if_open((uv_handle_t *)&srv->drain);
  close_if_open((uv_handle_t *)&srv->watchdog);
  close_if_open((uv_handle_t *)&srv->hup_probe);
  close_if_open((uv_handle_t *)&srv->mem_wait);
  vld_shares_free(&srv->shares);
  vld_log_info("stopped");
}

/* A connection was freed: a shutdown is finished once no connection is left. */
static void finish_if_done(vld_server *srv) {
  if (srv->shutting_down && srv->conns == NULL) {
    finish(srv);
  }
}

static void close_all(vld_server *srv) {
  for (vld_conn *c = srv->conns; c != NULL; c = c->next) {
    vld_conn_close(c);
  }
}

/* The drain took too long. Connections with nothing on the pool (a half-received frame, or
 * responses their client does not read) are closed. Requests still queued are answered -32007
 * rather than run; running ones finish and are answered (the process could not exit before
 * they end anyway), after which their connections close as they drain, or at their idle
 * timeout if the client stops reading. */
static void on_drain_timeout(uv_timer_t *t) {
  vld_server *srv = t->data;
  vld_log_warn("drain timeout of %llu ms: %u connections, %u requests in flight; queued requests "
              "are answered -32007, running ones finish",
              (unsigned long long)srv->cfg->drain_timeout_ms, srv->n_conns, srv->dispatch.inflight);
  for (vld_conn *c = srv->conns; c != NULL;) {
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
  if (!srv->listening) {
    return;
  }
  srv->listening = false;
  uv_close((uv_handle_t *)&srv->listener, NULL);
  /* New clients fail fast instead of queueing. Only the file we bound: another daemon may have
   * bound a new socket at the path since ours was removed. */
  if (srv->socket_path[0] != '\0' && path_is_ours(srv)) {
    unlink(srv->socket_path);
  }
  unlock_path(srv);
}

void vld_server_shutdown(vld_server *srv) {
  if (srv->shutting_down) {
    vld_log_warn("second stop signal: closing every connection now");
    close_all(srv);
    return;
  }
  srv->shutting_down = true;
  char status[96];
  snprintf(status, sizeof status, "STOPPING=1\nSTATUS=draining %u requests", srv->dispatch.inflight);
  vld_systemd_notify(status);
  vld_log_info("stopping: %u connections, %u requests in flight", srv->n_conns, srv->dispatch.inflight);
  stop_listening(srv);
  uv_timer_start(&srv->drain, on_drain_timeout, srv->cfg->drain_timeout_ms, 0);
  for (vld_conn *c = srv->conns; c != NULL;) {
    vld_conn *next = c->next; /* drain may close c, never free it: its handles hold a ref */
    vld_conn_drain(c);
    c = next;
  }
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

/* The pool just went idle: hand the heap's free pages back to the system. Tensor buffers of a
 * burst leave the heap fragmented at its high-water mark, which a daemon that idles between
 * bursts would otherwise keep resident. Runs at most once per busy-to-idle transition of the
 * probe below (>= HUP_PROBE_MS apart), never under steady load. */
static void release_idle_memory(void) {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

/* A connection that is not being read (over its limits, or after a half-close) would notice
 * its peer leaving only when a response fails to be written, after all its queued work ran
 * for nobody. So while work is on the pool, look for hung-up peers of such connections. */
static void on_hup_probe(uv_timer_t *t) {
  vld_server *srv = t->data;
  for (vld_conn *c = srv->conns; c != NULL; c = c->next) {
    if (c->inflight > 0 && !c->reading) {
      vld_conn_probe_hangup(c); /* may close c, never frees it: its handles hold a ref */
    }
  }
  if (srv->dispatch.inflight == 0) {
    uv_timer_stop(t);
    release_idle_memory();
  }
}

/* Connections paused for memory (their next frame, or the whole daemon over the budget) get
 * another try as memory is released; the timer stops once nothing waits. */
static void on_mem_wait(uv_timer_t *t) {
  vld_server *srv = t->data;
  /* Waiting connections whose peer left close (and leave the queue); a refused one leaves it. */
  for (vld_conn *c = srv->mem_head, *next; c != NULL; c = next) {
    next = c->mem_next;
    if (c->input_done) {
      mem_dequeue(srv, c);
    } else {
      vld_conn_probe_hangup(c); /* may close c (on_closing dequeues it), never frees it */
    }
  }
  /* Admit from the head while frames fit: each settle asks for its frame's memory again. */
  for (vld_conn *c = srv->mem_head; c != NULL; c = srv->mem_head) {
    vld_conn_settle(c);
    if (srv->mem_head == c) {
      break; /* it still does not fit: nobody behind it goes first */
    }
  }
  bool waiting = srv->mem_head != NULL;
  for (vld_conn *c = srv->conns; c != NULL; c = c->next) {
    if (!c->reading && !c->closing && !c->mem_queued) {
      vld_conn_settle(c); /* may close c, never frees it: its handles hold a ref */
      waiting |= !c->closing && (c->mem_queued || (c->writes > 0 && !vld_mem_fits(0)));
    }
  }
  if (!waiting) {
    uv_timer_stop(t);
  }
}

static void watch_memory(vld_server *srv) {
  if (!srv->finished && !uv_is_active((uv_handle_t *)&srv->mem_wait)) {
    uv_timer_start(&srv->mem_wait, on_mem_wait, MEM_WAIT_MS, MEM_WAIT_MS);
  }
}

static void watch_hangups(vld_server *srv) {
  if (!srv->finished && !uv_is_active((uv_handle_t *)&srv->hup_probe)) {
    uv_timer_start(&srv->hup_probe, on_hup_probe, HUP_PROBE_MS, HUP_PROBE_MS);
  }
}

static void on_watchdog(uv_timer_t *t) {
  (void)t;
  vld_systemd_notify("WATCHDOG=1");
}

/* ---- the dispatcher's callbacks ------------------------------------------------------- */

static void on_work_queued(void *owner) {
  watch_hangups(owner);
}

/* The "stats" method: the counters and what only the server knows. */
static cJSON *stats_result(void *owner) {
  vld_server *srv = owner;
  const char *names[VLD_STATS_MAX_METHODS];
  size_t n = vld_dispatch_method_count();
  n = n < VLD_STATS_MAX_METHODS ? n : VLD_STATS_MAX_METHODS;
  for (size_t i = 0; i < n; i++) {
    names[i] = vld_dispatch_method_name(i);
  }
  vld_stats_view v = {.method_names = names,
                      .n_methods = n,
                      .conns_current = srv->n_conns,
                      .conns_waiting_for_memory = srv->n_mem_waiting,
                      .requests_in_flight = srv->dispatch.inflight,
                      .now_ns = uv_hrtime(),
                      .open_files_limit = srv->nofile,
                      .memory_budget = vld_mem_budget(),
                      .memory_in_use = vld_mem_in_use(),
                      .memory_peak = vld_mem_peak()};
  return vld_stats_to_json(&srv->stats, &v);
}

/* ---- start ---------------------------------------------------------------------------- */

static int start_listening(vld_server *srv) {
  uv_pipe_init(srv->loop, &srv->listener, 0);
  srv->listener.data = srv;
  srv->listening = true;
  int fd = vld_systemd_listen_fd();
  int rc = 0;
  if (fd == -2) {
    return -1;
  }
  if (fd >= 0) {
    rc = uv_pipe_open(&srv->listener, fd);
    vld_log_info("using the socket passed by systemd (fd %d)", fd);
  } else if (bind_path(srv) != 0) {
    return -1;
  }
  if (rc == 0) {
    rc = uv_listen((uv_stream_t *)&srv->listener, LISTEN_BACKLOG, on_connection);
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
  uv_timer_init(srv->loop, &srv->hup_probe);
  uv_timer_init(srv->loop, &srv->mem_wait);
  srv->hup_probe.data = srv;
  srv->mem_wait.data = srv;
  srv->sigterm.data = srv;
  srv->sigint.data = srv;
  srv->drain.data = srv;
  srv->watchdog.data = srv;
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
 * allows) and caps open connections below it, so accept never runs out of descriptors. */
static void size_fd_limit(vld_server *srv) {
  struct rlimit rl;
  uint64_t base = (uint64_t)fds_open() + FD_RESERVE;
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

int vld_server_start(vld_server *srv, uv_loop_t *loop, const vld_config *cfg) {
  memset(srv, 0, sizeof *srv);
  srv->loop = loop;
  srv->cfg = cfg;
  srv->lock_fd = -1;
  srv->self_uid = geteuid();
  srv->conn_limits = (vld_conn_limits){.max_frame_bytes = cfg->max_frame_bytes,
                                       .max_inflight = cfg->max_inflight,
                                       .max_write_queue = cfg->max_write_queue,
                                       .idle_timeout_ms = cfg->idle_timeout_ms};
  srv->dispatch = (vld_dispatcher){.loop = loop,
                                   .cfg = cfg,
                                   .stats = &srv->stats,
                                   .shares = &srv->shares,
                                   .owner = srv,
                                   .on_queued = on_work_queued,
                                   .stats_result = stats_result};
  vld_stats_init(&srv->stats, uv_hrtime());
  start_handles(srv);
  size_fd_limit(srv);
  if (start_signals(srv) != 0 || start_listening(srv) != 0) {
    stop_listening(srv);
    srv->shutting_down = true;
    finish(srv);
    return -1;
  }
  char status[160];
  snprintf(status, sizeof status, "READY=1\nSTATUS=listening on %s",
           srv->socket_path[0] != '\0' ? srv->socket_path : "the socket passed by systemd");
  vld_systemd_notify(status);
  vld_log_info("listening on %s (%u workers, max %u connections, max %u queued)",
              srv->socket_path[0] != '\0' ? srv->socket_path : "the socket passed by systemd",
              cfg->workers, cfg->max_connections, cfg->max_queued);
  return 0;
}
