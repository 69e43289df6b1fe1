/* ctl_metrics.h - the daemon's stats as OpenMetrics / Prometheus text (ctl_metrics.c). */
#ifndef VIEWLOWER_CTL_METRICS_H
#define VIEWLOWER_CTL_METRICS_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>

typedef enum {
  VL__CTL_FORMAT_JSON,
  VL__CTL_FORMAT_OPENMETRICS,
  VL__CTL_FORMAT_PROMETHEUS
} vl__ctl_format;

/* "json", "openmetrics" or "prometheus". */
bool vl__ctl_format_from_name(const char *name, vl__ctl_format *out);
/* Prints the stats result as metrics text (format openmetrics or prometheus). */
void vl__ctl_print_metrics(FILE *out, const cJSON *stats, vl__ctl_format format);

#endif
