/* systemd.h - the two systemd protocols viewlowerd speaks, implemented directly: socket
 * activation ($LISTEN_FDS / $LISTEN_PID, first fd 3) and sd_notify over the datagram socket
 * named by $NOTIFY_SOCKET (a path, or an abstract name starting with '@'). */
#ifndef VIEWLOWERD_SYSTEMD_H
#define VIEWLOWERD_SYSTEMD_H

#include <stdint.h>

/* The first fd passed by socket activation, or -1 when the environment passes none to this
 * process. The fd is checked to be a listening Unix stream socket (else -2 and a logged
 * error) and gets FD_CLOEXEC; LISTEN_* are removed from the environment either way. */
int vld_systemd_listen_fd(void);

/* Sends state ("READY=1\nSTATUS=...") to $NOTIFY_SOCKET; a no-op without it. Returns 0, or
 * -errno when sending failed (logged at debug level only: notification is best effort). */
int vld_systemd_notify(const char *state);

/* The watchdog interval in microseconds ($WATCHDOG_USEC, when $WATCHDOG_PID is unset or is this
 * process), or 0 when the watchdog is off. */
uint64_t vld_systemd_watchdog_usec(void);

#endif
