/* cli_harness.h - what the viewlowerctl tests (test_cli, test_fidelity, test_worker) share: a
 * scratch directory, files in it, the real viewlowerctl run as a child with stdin given and
 * stdout, stderr and the exit status captured, and a real viewlowerd to run it against. The
 * daemon is started and stopped by the integration harness (tests/integration/harness.h), the
 * one place tests start daemons: its waits are bounded and a test that fails leaves no daemon
 * and no directory behind. */
#ifndef VIEWLOWER_CLI_HARNESS_H
#define VIEWLOWER_CLI_HARNESS_H

#include <stdbool.h>
#include <stddef.h>

/* The scratch directory, made by the group setup. */
extern char cli_tmpdir[256];

/* One finished run of viewlowerctl. status: the exit status, or 128 + the signal that ended it. */
typedef struct {
  int status;
  char *out, *err; /* NUL-terminated (out may hold NUL bytes: out_len counts them) */
  size_t out_len;
} cli_result;

/* cmocka group fixtures. cli_group_setup makes the scratch directory cli_tmpdir
 * (/tmp/vlcli.XXXXXX); cli_group_setup_daemon also starts viewlowerd on a socket in a directory
 * of its own and waits until it accepts connections, for cli_run(false, ...) to talk to;
 * cli_group_teardown stops the daemon (SIGTERM; a non-zero exit status prints its log and makes
 * cli_exit_status 1) and removes cli_tmpdir with all below it. 0 or -1. */
int cli_group_setup(void **state);
int cli_group_setup_daemon(void **state);
int cli_group_teardown(void **state);
/* The daemon's socket path ("" when no daemon was started). */
const char *cli_socket(void);
/* main's exit status: 1 when cmocka counted failed tests or the daemon did not exit 0 (cmocka
 * does not count a failed group teardown). */
int cli_exit_status(int failed_tests);

/* Runs VL_CTL with argv (argv[0] included, NULL-terminated), stdin the in_len bytes of in;
 * env NULL keeps ours. as_nobody: when root, run as uid/gid 65534 (exit 127 if it cannot). */
cli_result cli_spawn(const char *in, size_t in_len, const char *const *argv,
                     const char *const *env, bool as_nobody);
/* viewlowerctl --local ARGS (local) or viewlowerctl --socket <the daemon's> ARGS, stdin in_text
 * (NULL: empty). */
cli_result cli_run(bool local, const char *in_text, const char *const *args);
/* Runs ARGS in both modes; asserts exit status want_status in both and the same stdout and
 * stderr; returns the local run (free it with cli_result_free). */
cli_result cli_both(const char *in_text, const char *const *args, int want_status);
void cli_result_free(cli_result *r);

/* The whole file, NUL-terminated (malloc'd; *len its size when len is not NULL); a file that
 * cannot be read fails the test. */
char *cli_slurp(const char *path, size_t *len);
/* Writes n bytes to path (fails the test when it cannot). */
void cli_write(const char *path, const void *bytes, size_t n);
/* cli_tmpdir/name into out. */
void cli_tmp_path(char *out, size_t cap, const char *name);
/* cli_tmpdir/name written with text; the path, in a static slot (four in turn). */
const char *cli_temp_file(const char *name, const char *text);

#endif
