/* bench_daemon.h - viewlower-bench --daemon SOCKET (bench/daemon.c). */
#ifndef VL_BENCH_DAEMON_H
#define VL_BENCH_DAEMON_H

#include <cjson/cJSON.h>
#include <stdbool.h>

/* {"lower_small_rps_inprocess", "inprocess_threads", "blob_64mib_roundtrip_gbps",
 *  "socket_echo_gbps", "blob_repeats"} against the viewlowerd listening on socket_path. */
cJSON *vl_bench_daemon(const char *socket_path, bool quick);
/* The memory plan's figures (bench/plan.c). */
cJSON *vl_bench_plan(bool quick);

#endif
