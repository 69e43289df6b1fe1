/* log.c - leveled logging to stderr. The level and the journald flag are process-wide state
 * set once at startup, before the loop runs; records are written with a single fputs of a
 * line built in a local buffer, so records from different threads never interleave. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { LOG_LINE_MAX = 2048 };

static const struct {
  const char *name;
  int syslog_priority; /* <N> prefix for journald: 7 debug, 6 info, 4 warning, 3 err */
} levels[] = {
    [VLD_LOG_DEBUG] = {"debug", 7},
    [VLD_LOG_INFO] = {"info", 6},
    [VLD_LOG_WARN] = {"warn", 4},
    [VLD_LOG_ERROR] = {"error", 3},
};

static vld_log_level threshold = VLD_LOG_INFO;
static bool to_journal;

bool vld_log_level_from_name(const char *name, vld_log_level *out) {
  for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
    if (strcmp(name, levels[i].name) == 0) {
      *out = (vld_log_level)i;
      return true;
    }
  }
  return false;
}

const char *vld_log_level_name(vld_log_level level) {
  return levels[level].name;
}

/* True when stderr is the journal stream systemd connected: $JOURNAL_STREAM is "DEV:INODE" of
 * that stream, and it must match stderr's own device and inode (as sd-daemon checks), since a
 * child that inherited the variable but redirected stderr elsewhere is not writing to it. */
static bool stderr_is_journal(void) {
  const char *js = getenv("JOURNAL_STREAM");
  unsigned long long dev = 0, ino = 0;
  int end = 0;
  struct stat st;
  if (js == NULL || sscanf(js, "%llu:%llu%n", &dev, &ino, &end) != 2 || js[end] != '\0' ||
      fstat(STDERR_FILENO, &st) != 0) {
    return false;
  }
  return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void vld_log_init(vld_log_level level) {
  threshold = level;
  to_journal = stderr_is_journal();
}

bool vld_log_enabled(vld_log_level level) {
  return level >= threshold;
}

/* "2024-05-01T12:00:00Z viewlowerd info: " for terminals, "<6>" for journald. */
static int line_prefix(char *buf, size_t n, vld_log_level level) {
  if (to_journal) {
    return snprintf(buf, n, "<%d>", levels[level].syslog_priority);
  }
  char stamp[32] = "";
  time_t t = time(NULL);
  struct tm tm;
  if (gmtime_r(&t, &tm) != NULL) {
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ ", &tm);
  }
  return snprintf(buf, n, "%sviewlowerd %s: ", stamp, levels[level].name);
}

void vld_log(vld_log_level level, const char *fmt, ...) {
  if (!vld_log_enabled(level)) {
    return;
  }
  char line[LOG_LINE_MAX];
  int at = line_prefix(line, sizeof line - 1, level);
  if (at < 0 || (size_t)at >= sizeof line - 2) {
    at = 0;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + at, sizeof line - 1 - (size_t)at, fmt, ap);
  va_end(ap);
  size_t len = strlen(line);
  for (size_t i = (size_t)at; i < len; i++) {
    if (line[i] == '\n' || line[i] == '\r') {
      line[i] = ' '; /* one record, one line, whatever a peer sent */
    }
  }
  line[len] = '\n';
  line[len + 1] = '\0';
  fputs(line, stderr);
}

static uint64_t monotonic_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u + 1u; /* never 0 */
}

void vld_log_limited(vld_log_limit *lim, vld_log_level level, const char *fmt, ...) {
  if (!vld_log_enabled(level)) {
    return;
  }
  uint64_t now = monotonic_ms();
  if (lim->last_ms != 0 && now - lim->last_ms < VLD_LOG_LIMIT_MS) {
    lim->held++;
    return;
  }
  char text[LOG_LINE_MAX / 2];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (lim->held > 0) {
    vld_log(level, "%s (%llu more like this in the last %llu s)", text,
           (unsigned long long)lim->held, (unsigned long long)((now - lim->last_ms) / 1000u));
  } else {
    vld_log(level, "%s", text);
  }
  lim->last_ms = now;
  lim->held = 0;
}
