/* systemd.c - socket activation and sd_notify without libsystemd.
 *
 * Socket activation: systemd passes listening sockets from fd 3 (SD_LISTEN_FDS_START) and
 * sets LISTEN_PID to the pid it exec'd and LISTEN_FDS to their count. The variables are
 * unset after reading so that no child could mistake them for its own.
 * Notification: one datagram per call, state lines separated by '\n', sent with
 * MSG_NOSIGNAL; an '@' at the start of $NOTIFY_SOCKET names an abstract socket. */
#define _GNU_SOURCE /* abstract AF_UNIX addresses, MSG_NOSIGNAL */
#include "systemd.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"

enum { LISTEN_FDS_START = 3 };

/* A whole decimal number in 1..max from the environment, or 0. */
static uint64_t env_number(const char *name, uint64_t max) {
  const char *s = getenv(name);
  if (s == NULL || s[0] < '0' || s[0] > '9') {
    return 0;
  }
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  return errno == 0 && *end == '\0' && v <= max ? v : 0;
}

static int check_listener(int fd) {
  int type = 0, listening = 0;
  socklen_t len = sizeof type;
  struct sockaddr_un sa;
  socklen_t salen = sizeof sa;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM ||
      getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening ||
      getsockname(fd, (struct sockaddr *)&sa, &salen) != 0 || sa.sun_family != AF_UNIX) {
    vld_log_error("socket activation: fd %d is not a listening Unix stream socket", fd);
    return -2;
  }
  int flags = fcntl(fd, F_GETFD);
  if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) != 0) {
    vld_log_error("socket activation: fcntl on fd %d: %s", fd, strerror(errno));
    return -2;
  }
  return fd;
}

int vld_systemd_listen_fd(void) {
  uint64_t pid = env_number("LISTEN_PID", UINT32_MAX);
  uint64_t n = env_number("LISTEN_FDS", 1024);
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDS");
  unsetenv("LISTEN_FDNAMES");
  if (pid == 0 || pid != (uint64_t)getpid() || n == 0) {
    return -1;
  }
  if (n > 1) {
    vld_log_warn("socket activation passed %llu sockets; serving the first (fd %d)",
                (unsigned long long)n, LISTEN_FDS_START);
  }
  return check_listener(LISTEN_FDS_START);
}

/* Fills sa from $NOTIFY_SOCKET; returns the address length, or 0 when unusable. */
static socklen_t notify_address(const char *name, struct sockaddr_un *sa) {
  size_t len = strlen(name);
  if ((name[0] != '/' && name[0] != '@') || len < 2 || len >= sizeof sa->sun_path) {
    return 0;
  }
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  memcpy(sa->sun_path, name, len);
  if (name[0] == '@') {
    sa->sun_path[0] = '\0'; /* abstract: the length, not a NUL, ends the name */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
  }
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
}

int vld_systemd_notify(const char *state) {
  const char *name = getenv("NOTIFY_SOCKET");
  if (name == NULL || name[0] == '\0') {
    return 0;
  }
  struct sockaddr_un sa;
  socklen_t salen = notify_address(name, &sa);
  if (salen == 0) {
    vld_log_debug("sd_notify: unusable NOTIFY_SOCKET '%s'", name);
    return -EINVAL;
  }
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    int e = errno;
    vld_log_debug("sd_notify: socket: %s", strerror(e));
    return -e;
  }
  int rc = 0;
  if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen) < 0) {
    rc = -errno;
    vld_log_debug("sd_notify to %s: %s", name, strerror(errno));
  }
  close(fd);
  return rc;
}

uint64_t vld_systemd_watchdog_usec(void) {
  uint64_t usec = env_number("WATCHDOG_USEC", UINT64_MAX);
  uint64_t pid = env_number("WATCHDOG_PID", UINT32_MAX);
  const char *pid_set = getenv("WATCHDOG_PID");
  if (pid_set != NULL && pid != (uint64_t)getpid()) {
    return 0;
  }
  return usec;
}
