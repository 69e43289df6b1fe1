/* stats.c - counters and latency percentiles (nearest rank over the latest VLD_STATS_WINDOW
 * requests; the maximum is over the daemon's whole life). */
#include "stats.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

const char *const vld_refusal_names[VLD_REFUSE_COUNT] = {
    [VLD_REFUSE_NOT_PERMITTED] = "not_permitted",
    [VLD_REFUSE_CONNECTIONS] = "max_connections",
    [VLD_REFUSE_UID] = "max_connections_per_uid",
    [VLD_REFUSE_FD_LIMIT] = "fd_limit",
    [VLD_REFUSE_NOMEM] = "out_of_memory",
    [VLD_REFUSE_ACCEPT_ERROR] = "accept_error",
};

const char *const vld_shed_names[VLD_SHED_COUNT] = {
    [VLD_SHED_QUEUE] = "max_queued",
    [VLD_SHED_UID] = "max_queued_per_uid",
    [VLD_SHED_MEMORY] = "max_memory",
    [VLD_SHED_UID_MEMORY] = "max_memory_per_uid",
};

/* {names[i]: counts[i]...}; NULL on out-of-memory. */
static cJSON *counters_json(const char *const *names, const uint64_t *counts, size_t n) {
  cJSON *o = cJSON_CreateObject();
  for (size_t i = 0; o != NULL && i < n; i++) {
    if (cJSON_AddNumberToObject(o, names[i], (double)counts[i]) == NULL) {
      cJSON_Delete(o);
      o = NULL;
    }
  }
  return o;
}

void vld_stats_init(vld_stats *s, uint64_t now_ns) {
  memset(s, 0, sizeof *s);
  s->start_ns = now_ns;
}

void vld_stats_record(vld_stats *s, int method, int is_error, uint64_t latency_ns) {
  vld_method_counts *c =
      method >= 0 && method < VLD_STATS_MAX_METHODS ? &s->by_method[method] : &s->invalid;
  c->requests++;
  c->errors += is_error ? 1u : 0u;
  uint64_t us = latency_ns / 1000;
  uint32_t sample = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
  s->latency_us[s->latency_count % VLD_STATS_WINDOW] = sample;
  s->latency_count++;
  if (sample > s->latency_max_us) {
    s->latency_max_us = sample;
  }
}

/* Sorts a[0..n) (n <= VLD_STATS_WINDOW) a byte at a time (LSD radix; a pass where every key has
 * the same byte is skipped): linear whatever the values. A client may pipeline stats requests,
 * each answered on the loop: qsort of the full window cost 150-190 us of it per request. */
static void sort_samples(uint32_t *a, size_t n) {
  uint32_t tmp[VLD_STATS_WINDOW];
  uint32_t *from = a, *to = tmp;
  for (unsigned shift = 0; shift < 32; shift += 8) {
    size_t count[257] = {0};
    for (size_t i = 0; i < n; i++) count[((from[i] >> shift) & 255u) + 1]++;
    bool one_bucket = false;
    for (size_t b = 1; b <= 256 && !one_bucket; b++) one_bucket = count[b] == n;
    if (one_bucket) continue;
    for (size_t b = 1; b <= 256; b++) count[b] += count[b - 1];
    for (size_t i = 0; i < n; i++) to[count[(from[i] >> shift) & 255u]++] = from[i];
    uint32_t *t = from;
    from = to;
    to = t;
  }
  if (from != a) memcpy(a, from, n * sizeof *a);
}

/* Nearest-rank percentile p (1..100) of sorted[0..n), n > 0. */
static uint32_t percentile(const uint32_t *sorted, size_t n, unsigned p) {
  size_t rank = (n * p + 99) / 100;
  return sorted[rank > 0 ? rank - 1 : 0];
}

static cJSON *latency_json(const vld_stats *s) {
  size_t n = s->latency_count < VLD_STATS_WINDOW ? s->latency_count : VLD_STATS_WINDOW;
  uint32_t sorted[VLD_STATS_WINDOW];
  memcpy(sorted, s->latency_us, n * sizeof sorted[0]);
  sort_samples(sorted, n);
  cJSON *o = cJSON_CreateObject();
  if (o == NULL) {
    return NULL;
  }
  static const unsigned ps[] = {50, 90, 99};
  static const char *const keys[] = {"p50", "p90", "p99"};
  for (size_t i = 0; i < 3; i++) {
    double v = n > 0 ? (double)percentile(sorted, n, ps[i]) : 0.0;
    if (cJSON_AddNumberToObject(o, keys[i], v) == NULL) {
      cJSON_Delete(o);
      return NULL;
    }
  }
  if (cJSON_AddNumberToObject(o, "max", (double)s->latency_max_us) == NULL ||
      cJSON_AddNumberToObject(o, "samples", (double)n) == NULL) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

static cJSON *counts_json(const vld_method_counts *c) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL || cJSON_AddNumberToObject(o, "requests", (double)c->requests) == NULL ||
      cJSON_AddNumberToObject(o, "errors", (double)c->errors) == NULL) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

/* Adds item under key, or deletes it; 0 when item is NULL or the add fails. */
static int add(cJSON *o, const char *key, cJSON *item) {
  if (item != NULL && cJSON_AddItemToObject(o, key, item)) {
    return 1;
  }
  cJSON_Delete(item);
  return 0;
}

/* {"total","errors","in_flight","cancelled","invalid":{..},
 *  "by_method":{name:{"requests","errors"}}}; cancelled requests were never answered, so they
 * are not in total. */
static cJSON *requests_json(const vld_stats *s, const vld_stats_view *v) {
  cJSON *by = cJSON_CreateObject();
  vld_method_counts total = s->invalid;
  for (size_t i = 0; i < v->n_methods; i++) {
    if (by != NULL && !add(by, v->method_names[i], counts_json(&s->by_method[i]))) {
      cJSON_Delete(by);
      by = NULL;
    }
    total.requests += s->by_method[i].requests;
    total.errors += s->by_method[i].errors;
  }
  cJSON *o = cJSON_CreateObject();
  if (o == NULL) {
    cJSON_Delete(by);
    return NULL;
  }
  if (!add(o, "by_method", by) || !add(o, "invalid", counts_json(&s->invalid)) ||
      cJSON_AddNumberToObject(o, "total", (double)total.requests) == NULL ||
      cJSON_AddNumberToObject(o, "errors", (double)total.errors) == NULL ||
      cJSON_AddNumberToObject(o, "in_flight", (double)v->requests_in_flight) == NULL ||
      !add(o, "overloaded", counters_json(vld_shed_names, s->shed, VLD_SHED_COUNT)) ||
      cJSON_AddNumberToObject(o, "cancelled", (double)s->cancelled) == NULL ||
      cJSON_AddNumberToObject(o, "served_on_loop", (double)s->served_on_loop) == NULL) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

static cJSON *connections_json(const vld_stats *s, const vld_stats_view *v) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL || cJSON_AddNumberToObject(o, "current", v->conns_current) == NULL ||
      cJSON_AddNumberToObject(o, "waiting_for_memory", v->conns_waiting_for_memory) == NULL ||
      cJSON_AddNumberToObject(o, "admitted_after_waiting", (double)s->memory_waits_admitted) ==
          NULL ||
      cJSON_AddNumberToObject(o, "total", (double)s->conns_total) == NULL ||
      cJSON_AddNumberToObject(o, "rejected", (double)s->conns_rejected) == NULL ||
      cJSON_AddNumberToObject(o, "yielded", (double)s->yields) == NULL ||
      cJSON_AddNumberToObject(o, "paused_for_memory_share", (double)s->share_pauses) == NULL ||
      cJSON_AddNumberToObject(o, "open_files_limit", (double)v->open_files_limit) == NULL ||
      !add(o, "refused", counters_json(vld_refusal_names, s->refused, VLD_REFUSE_COUNT))) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

static cJSON *memory_json(const vld_stats_view *v) {
  cJSON *o = cJSON_CreateObject();
  if (o == NULL || cJSON_AddNumberToObject(o, "budget_bytes", (double)v->memory_budget) == NULL ||
      cJSON_AddNumberToObject(o, "in_use_bytes", (double)v->memory_in_use) == NULL ||
      cJSON_AddNumberToObject(o, "peak_bytes", (double)v->memory_peak) == NULL ||
      cJSON_AddNumberToObject(o, "kept_bytes", (double)v->memory_kept) == NULL ||
      cJSON_AddNumberToObject(o, "unsent_bytes", (double)v->memory_unsent) == NULL ||
      cJSON_AddNumberToObject(o, "share_per_uid_bytes", (double)v->memory_share_per_uid) == NULL) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

cJSON *vld_stats_to_json(const vld_stats *s, const vld_stats_view *v) {
  cJSON *o = cJSON_CreateObject();
  double uptime_ms = (double)((v->now_ns - s->start_ns) / 1000000);
  if (o == NULL || cJSON_AddNumberToObject(o, "uptime_ms", uptime_ms) == NULL ||
      !add(o, "connections", connections_json(s, v)) || !add(o, "requests", requests_json(s, v)) ||
      cJSON_AddNumberToObject(o, "views_replaced", (double)s->views_replaced) == NULL ||
      cJSON_AddNumberToObject(o, "bytes_saved", (double)s->bytes_saved) == NULL ||
      !add(o, "latency_us", latency_json(s)) || !add(o, "memory", memory_json(v))) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}
