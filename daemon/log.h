/* log.h - the daemon's log: one line per record on stderr, filtered by level; with
 * $JOURNAL_STREAM set, each line carries a "<N>" syslog priority prefix for journald. */
#ifndef VIEWLOWERD_LOG_H
#define VIEWLOWERD_LOG_H

#include <stdbool.h>
#include <stdint.h>

typedef enum { VLD_LOG_DEBUG, VLD_LOG_INFO, VLD_LOG_WARN, VLD_LOG_ERROR } vld_log_level;

/* "debug" | "info" | "warn" | "error" -> level; false when unknown. */
bool vld_log_level_from_name(const char *name, vld_log_level *out);
const char *vld_log_level_name(vld_log_level level);
/* Sets the threshold and reads $JOURNAL_STREAM once. */
void vld_log_init(vld_log_level level);
bool vld_log_enabled(vld_log_level level);
void vld_log(vld_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One condition's rate limit (loop thread only): its first record is written, then at most one
 * per VLD_LOG_LIMIT_MS, carrying how many were held back since the last one written. */
#define VLD_LOG_LIMIT_MS 10000
typedef struct vld_log_limit {
  uint64_t last_ms; /* when the last record was written; 0: never */
  uint64_t held;    /* records held back since */
} vld_log_limit;
void vld_log_limited(vld_log_limit *lim, vld_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define vld_log_debug(...) vld_log(VLD_LOG_DEBUG, __VA_ARGS__)
#define vld_log_info(...) vld_log(VLD_LOG_INFO, __VA_ARGS__)
#define vld_log_warn(...) vld_log(VLD_LOG_WARN, __VA_ARGS__)
#define vld_log_error(...) vld_log(VLD_LOG_ERROR, __VA_ARGS__)

#endif
