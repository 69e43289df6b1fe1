/* ctl_metrics.c - `viewlowerctl stats --format openmetrics|prometheus`: the daemon's stats
 * result as metrics text, one table row per metric.
 *
 * openmetrics is the OpenMetrics 1.0 text format (counter families named without _total, their
 * samples with it, `# UNIT` for units, a closing `# EOF`); prometheus is the Prometheus text
 * exposition format 0.0.4 that node_exporter's textfile collector reads (TYPE lines name the
 * samples, no # EOF). A stats field the daemon does not send is left out, never guessed. */
#include "ctl_metrics.h"

#include <stdlib.h>
#include <string.h>

typedef enum { COUNTER, GAUGE } metric_type;

typedef struct {
  const char *name; /* without _total */
  metric_type type;
  const char *unit; /* OpenMetrics unit ("seconds", "bytes"), or NULL */
  const char *path; /* of the number in the stats result; a "?" step fans out over the keys of
                       the object there, each a sample labelled `label` (the rest of the path,
                       if any, is followed in each) */
  const char *label;
  double scale; /* multiplies the JSON number (milliseconds and microseconds to seconds) */
  const char *help;
} metric;

static const metric metrics[] = {
    {"viewlower_uptime_seconds", GAUGE, "seconds", "uptime_ms", NULL, 1e-3,
     "Time since the daemon started."},
    {"viewlower_connections", GAUGE, NULL, "connections/current", NULL, 1, "Open connections."},
    {"viewlower_connections_accepted", COUNTER, NULL, "connections/total", NULL, 1,
     "Connections admitted since start."},
    {"viewlower_connections_rejected", COUNTER, NULL, "connections/rejected", NULL, 1,
     "Connections refused (not permitted, or over --max-connections)."},
    {"viewlower_requests", COUNTER, NULL, "requests/by_method/?/requests", "method", 1,
     "Requests answered, by method (invalid: requests that named no known method)."},
    {"viewlower_request_errors", COUNTER, NULL, "requests/by_method/?/errors", "method", 1,
     "Requests answered with an error, by method."},
    {"viewlower_connections_refused", COUNTER, NULL, "connections/refused/?", "reason", 1,
     "Connections refused or dropped, by reason."},
    {"viewlower_open_files_limit", GAUGE, NULL, "connections/open_files_limit", NULL, 1,
     "The daemon's soft limit of open files."},
    {"viewlower_requests_in_flight", GAUGE, NULL, "requests/in_flight", NULL, 1,
     "Requests received and not yet answered."},
    {"viewlower_requests_cancelled", COUNTER, NULL, "requests/cancelled", NULL, 1,
     "Requests never answered because their connection went away."},
    {"viewlower_requests_overloaded", COUNTER, NULL, "requests/overloaded/?", "limit", 1,
     "Requests refused with -32005 (overloaded), by the limit they met."},
    {"viewlower_views_replaced", COUNTER, NULL, "views_replaced", NULL, 1,
     "Layout-only copies replaced by memory.view aliases."},
    {"viewlower_saved_bytes", COUNTER, "bytes", "bytes_saved", NULL, 1,
     "Bytes of copies that lowering removed."},
    {"viewlower_request_latency_p50_seconds", GAUGE, "seconds", "latency_us/p50", NULL, 1e-6,
     "Median request latency over the latest requests."},
    {"viewlower_request_latency_p90_seconds", GAUGE, "seconds", "latency_us/p90", NULL, 1e-6,
     "90th percentile request latency over the latest requests."},
    {"viewlower_request_latency_p99_seconds", GAUGE, "seconds", "latency_us/p99", NULL, 1e-6,
     "99th percentile request latency over the latest requests."},
    {"viewlower_request_latency_max_seconds", GAUGE, "seconds", "latency_us/max", NULL, 1e-6,
     "Largest request latency since start."},
    {"viewlower_request_latency_samples", GAUGE, NULL, "latency_us/samples", NULL, 1,
     "Requests the latency percentiles are computed over."},
    {"viewlower_memory_budget_bytes", GAUGE, "bytes", "memory/budget_bytes", NULL, 1,
     "Bytes the daemon's requests may hold at once (0: no budget)."},
    {"viewlower_memory_in_use_bytes", GAUGE, "bytes", "memory/in_use_bytes", NULL, 1,
     "Bytes held by requests now."},
    {"viewlower_memory_peak_bytes", GAUGE, "bytes", "memory/peak_bytes", NULL, 1,
     "Most bytes held by requests at once since start."},
    {"viewlower_memory_kept_bytes", GAUGE, "bytes", "memory/kept_bytes", NULL, 1,
     "Large freed blocks kept mapped for the next large request (not in use)."},
    {"viewlower_memory_unsent_bytes", GAUGE, "bytes", "memory/unsent_bytes", NULL, 1,
     "Bytes of responses written but not yet read by their clients, all users."},
    {"viewlower_memory_share_per_uid_bytes", GAUGE, "bytes", "memory/share_per_uid_bytes", NULL, 1,
     "Unread response bytes one user may hold while another user is connected."},
};

/* Follows "a/b/c" from o; NULL when a step is missing. */
static const cJSON *at_path(const cJSON *o, const char *path, size_t len) {
  while (o != NULL && len > 0) {
    size_t step = strcspn(path, "/");
    if (step > len) step = len;
    const cJSON *next = NULL;
    for (const cJSON *c = cJSON_IsObject(o) ? o->child : NULL; c != NULL; c = c->next) {
      if (c->string && strlen(c->string) == step && strncmp(c->string, path, step) == 0) next = c;
    }
    o = next;
    path += step;
    len -= step;
    if (len > 0) {
      path++;
      len--;
    }
  }
  return o;
}

/* A label value with \, " and newline escaped as both formats ask. */
static void label_value(FILE *out, const char *v) {
  for (; *v != '\0'; v++) {
    if (*v == '\\' || *v == '"') fputc('\\', out);
    if (*v == '\n') {
      fputs("\\n", out);
      continue;
    }
    fputc(*v, out);
  }
}

/* The shortest of %.15g, %.16g, %.17g that reads back to the same double. */
static void number(FILE *out, double v) {
  char text[40];
  for (int digits = 15; digits <= 17; digits++) {
    snprintf(text, sizeof text, "%.*g", digits, v);
    if (strtod(text, NULL) == v) break;
  }
  fputs(text, out);
}

static void sample(FILE *out, const metric *m, const char *label_value_text, const cJSON *value) {
  fprintf(out, "%s%s", m->name, m->type == COUNTER ? "_total" : "");
  if (label_value_text != NULL) {
    fprintf(out, "{%s=\"", m->label);
    label_value(out, label_value_text);
    fputs("\"}", out);
  }
  fputc(' ', out);
  number(out, value->valuedouble * m->scale);
  fputc('\n', out);
}

static void family(FILE *out, const metric *m, bool openmetrics) {
  const char *type = m->type == COUNTER ? "counter" : "gauge";
  const char *suffix = !openmetrics && m->type == COUNTER ? "_total" : "";
  fprintf(out, "# HELP %s%s %s\n# TYPE %s%s %s\n", m->name, suffix, m->help, m->name, suffix, type);
  if (openmetrics && m->unit != NULL) fprintf(out, "# UNIT %s %s\n", m->name, m->unit);
}

/* One metric row: a plain number, or one sample per key of the object at the "?" step (for
 * requests by method, also the requests that named no known method, method="invalid"). The
 * family is printed only when it has a sample. */
static void print_metric(FILE *out, const cJSON *stats, const metric *m, bool openmetrics) {
  const char *q = strchr(m->path, '?');
  if (q == NULL) {
    const cJSON *v = at_path(stats, m->path, strlen(m->path));
    if (!cJSON_IsNumber(v)) return;
    family(out, m, openmetrics);
    sample(out, m, NULL, v);
    return;
  }
  const cJSON *by = at_path(stats, m->path, (size_t)(q - m->path));
  const char *key = q[1] == '/' ? q + 2 : "";
  bool any = false;
  for (const cJSON *c = cJSON_IsObject(by) ? by->child : NULL; c != NULL; c = c->next) {
    const cJSON *v = at_path(c, key, strlen(key));
    if (c->string == NULL || !cJSON_IsNumber(v)) continue;
    if (!any) family(out, m, openmetrics);
    any = true;
    sample(out, m, c->string, v);
  }
  const cJSON *v = strstr(m->path, "by_method") != NULL
                       ? at_path(at_path(stats, "requests/invalid", 16), key, strlen(key))
                       : NULL;
  if (any && cJSON_IsNumber(v)) sample(out, m, "invalid", v);
}

bool vl__ctl_format_from_name(const char *name, vl__ctl_format *out) {
  static const char *const names[] = {"json", "openmetrics", "prometheus"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    if (strcmp(name, names[i]) == 0) {
      *out = (vl__ctl_format)i;
      return true;
    }
  }
  return false;
}

void vl__ctl_print_metrics(FILE *out, const cJSON *stats, vl__ctl_format format) {
  bool openmetrics = format == VL__CTL_FORMAT_OPENMETRICS;
  for (size_t i = 0; i < sizeof metrics / sizeof *metrics; i++) {
    print_metric(out, stats, &metrics[i], openmetrics);
  }
  if (openmetrics) fputs("# EOF\n", out);
}
