/* test_daemon_stats.c - the daemon's counters (daemon/stats.c): the latency percentiles are the
 * nearest ranks of the latest VLD_STATS_WINDOW samples, exactly, whatever their values (the
 * window is sorted a byte at a time, not by qsort, since every stats request sorts it on the
 * event loop). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "stats.h"

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

/* The nearest-rank percentile p of the sorted samples, as the daemon defines it. */
static uint32_t nearest_rank(const uint32_t *sorted, size_t n, unsigned p) {
  size_t rank = (n * p + 99) / 100;
  return sorted[rank > 0 ? rank - 1 : 0];
}

static uint64_t rng = 0x9E3779B97F4A7C15u;

static uint32_t next_u32(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}

/* A sample of a kind: small, spread over every byte, or one of few values (many equal keys). */
static uint32_t sample(int kind) {
  switch (kind) {
  case 0: return next_u32() % 200;
  case 1: return next_u32() >> (next_u32() % 32);
  default: return (next_u32() % 3) << 24 | 7;
  }
}

static void check_percentiles(const vld_stats *s, const uint32_t *kept, size_t n) {
  vld_stats_view v = {.now_ns = s->start_ns};
  cJSON *o = vld_stats_to_json(s, &v);
  assert_non_null(o);
  const cJSON *lat = cJSON_GetObjectItemCaseSensitive(o, "latency_us");
  uint32_t *sorted = malloc(n * sizeof *sorted);
  assert_non_null(sorted);
  memcpy(sorted, kept, n * sizeof *sorted);
  qsort(sorted, n, sizeof *sorted, cmp_u32);
  static const char *const keys[] = {"p50", "p90", "p99"};
  static const unsigned ps[] = {50, 90, 99};
  for (int i = 0; i < 3; i++) {
    const cJSON *got = cJSON_GetObjectItemCaseSensitive(lat, keys[i]);
    assert_true(cJSON_IsNumber(got));
    assert_true(got->valuedouble == (double)nearest_rank(sorted, n, ps[i]));
  }
  assert_true(cJSON_GetObjectItemCaseSensitive(lat, "samples")->valuedouble == (double)n);
  free(sorted);
  cJSON_Delete(o);
}

/* Windows part full and full (wrapped), of each kind of samples. */
static void latency_percentiles_are_the_nearest_ranks_of_the_window(void **state) {
  (void)state;
  static const size_t counts[] = {1, 2, 99, 100, 101, VLD_STATS_WINDOW - 1, VLD_STATS_WINDOW,
                                  3 * VLD_STATS_WINDOW + 17};
  static vld_stats s;
  static uint32_t all[3 * VLD_STATS_WINDOW + 17];
  for (int kind = 0; kind < 3; kind++) {
    for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
      vld_stats_init(&s, 0);
      size_t n = counts[c];
      for (size_t i = 0; i < n; i++) {
        all[i] = sample(kind);
        vld_stats_record(&s, 0, 0, (uint64_t)all[i] * 1000);
      }
      size_t kept = n < VLD_STATS_WINDOW ? n : VLD_STATS_WINDOW;
      check_percentiles(&s, all + (n - kept), kept);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(latency_percentiles_are_the_nearest_ranks_of_the_window),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
