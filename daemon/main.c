/* main.c - viewlowerd: parse flags, size the thread pool, ignore SIGPIPE, run the server (its
 * first event loop on this thread, the others on threads of their own) until a stop signal
 * drains it, then close the loops. Runs in the foreground:
 * no fork, no pidfile (docs/daemon.md). Exit codes: 0 after a stop signal, 1 when the daemon cannot
 * start, 64 on a usage error. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "config.h"
#include "log.h"
#include "memory.h"
#include "server.h"
#include "viewlower/service.h"

enum { EXIT_USAGE = 64 };

static int ignore_sigpipe(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_IGN;
  sigemptyset(&sa.sa_mask);
  return sigaction(SIGPIPE, &sa, NULL);
}

/* libuv reads UV_THREADPOOL_SIZE when the first work request is queued. */
static int size_thread_pool(uint32_t workers) {
  char n[16];
  snprintf(n, sizeof n, "%u", workers);
  return setenv("UV_THREADPOOL_SIZE", n, 1);
}

static int serve(const vld_config *cfg) {
  uv_loop_t loop;
  int rc = uv_loop_init(&loop);
  if (rc != 0) {
    vld_log_error("uv_loop_init: %s", uv_strerror(rc));
    return EXIT_FAILURE;
  }
  vld_server srv;
  vld_mem_cache_begin(); /* the main thread runs the first event loop */
  int status = vld_server_start(&srv, &loop, cfg) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
  uv_run(&loop, UV_RUN_DEFAULT);
  vld_server_join(&srv);
  rc = uv_loop_close(&loop);
  vld_mem_cache_end();
  if (rc != 0) {
    vld_log_error("uv_loop_close: %s", uv_strerror(rc));
    return EXIT_FAILURE;
  }
  return status;
}

int main(int argc, char **argv) {
  vld_config cfg;
  char msg[256];
  switch (vld_config_parse(&cfg, argc, argv, msg, sizeof msg)) {
  case VLD_CONFIG_HELP: vld_config_usage(stdout); return EXIT_SUCCESS;
  case VLD_CONFIG_VERSION:
    printf("viewlowerd %s (protocol %d)\n", vl_version(), VL_PROTOCOL_VERSION);
    return EXIT_SUCCESS;
  case VLD_CONFIG_ERROR: fprintf(stderr, "viewlowerd: %s\n", msg); return EXIT_USAGE;
  case VLD_CONFIG_OK: break;
  }
  vld_log_init((vld_log_level)cfg.log_level);
  if (ignore_sigpipe() != 0 || size_thread_pool(cfg.workers) != 0) {
    vld_log_error("cannot set up the process");
    return EXIT_FAILURE;
  }
  vld_mem_init(cfg.max_memory); /* before the loop or cJSON allocate anything */
  vld_log_info("memory budget: %llu bytes%s", (unsigned long long)vld_mem_budget(),
              cfg.max_memory == 0 ? " (derived from the machine; set with --max-memory)" : "");
  return serve(&cfg);
}
