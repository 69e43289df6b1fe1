/* timing.h - the clock and the median the figures of viewlower-bench (bench/bench.c and
 * bench/daemon.c) are measured with: CLOCK_MONOTONIC seconds, and the median of n samples
 * (sorted in place). */
#ifndef VL_BENCH_TIMING_H
#define VL_BENCH_TIMING_H

#include <stdlib.h>
#include <time.h>

static inline double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline int vl_bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static inline double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, vl_bench_cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
