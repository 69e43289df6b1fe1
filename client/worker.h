/* worker.h - `viewlowerctl worker`: Bazel's persistent-worker protocol (JSON) over the CLI.
 * Internal to viewlowerctl; docs/build-systems.md describes the protocol as served. */
#ifndef VIEWLOWER_CTL_WORKER_H
#define VIEWLOWER_CTL_WORKER_H

/* The CLI's entry point. Each request runs it in a fresh child process with
 * argv = {"viewlowerctl", "--local", <the request's command and its arguments>, NULL}. */
typedef int (*vl__ctl_main_fn)(int argc, char **argv);

/* `viewlowerctl worker ARGS` (args are what follows "worker"):
 *   --persistent_worker  serve WorkRequests (JSON objects) on stdin until it closes, one
 *                        WorkResponse per request on stdout, several requests at once when they
 *                        carry non-zero request ids (multiplex);
 *   @FILE | --flagfile=FILE  run the one request whose arguments FILE holds, one per line,
 *                        and exit with its exit code (what Bazel runs when workers are off).
 * Returns the process exit status. */
int vl__ctl_worker(int argc, char **argv, vl__ctl_main_fn run);

#endif
