/* cli_harness.c - scratch files, viewlowerctl runs and the daemon of the CLI tests. */
#define _GNU_SOURCE /* mkdtemp */
#include "cli_harness.h"

#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

char cli_tmpdir[256];
static daemon_proc the_daemon;
static bool daemon_started;

int cli_group_setup(void **state) {
  (void)state;
  snprintf(cli_tmpdir, sizeof cli_tmpdir, "/tmp/vlcli.XXXXXX");
  return mkdtemp(cli_tmpdir) != NULL ? 0 : -1;
}

int cli_group_setup_daemon(void **state) {
  if (cli_group_setup(state) != 0) return -1;
  daemon_prepare(&the_daemon);
  daemon_start(&the_daemon, NULL); /* --log-level debug into its log, printed on failure */
  daemon_started = true;
  return 0;
}

static int remove_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
  (void)sb;
  (void)type;
  (void)ftw;
  return remove(path);
}

int cli_group_teardown(void **state) {
  (void)state;
  int daemon_status = daemon_started ? daemon_finish(&the_daemon) : 0;
  daemon_started = false;
  int removed = nftw(cli_tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  return daemon_status == 0 && removed == 0 ? 0 : -1;
}

const char *cli_socket(void) {
  return daemon_started ? the_daemon.sock : "";
}

int cli_exit_status(int failed_tests) {
  return harness_result(failed_tests);
}

char *cli_slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) fail_msg("cannot read %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  size_t got = fread(buf, 1, (size_t)n, f);
  buf[got] = '\0';
  fclose(f);
  if (len != NULL) *len = got;
  return buf;
}

void cli_write(const char *path, const void *bytes, size_t n) {
  FILE *f = fopen(path, "wb");
  if (f == NULL) fail_msg("cannot write %s", path);
  assert_int_equal(fwrite(bytes, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

void cli_tmp_path(char *out, size_t cap, const char *name) {
  snprintf(out, cap, "%s/%s", cli_tmpdir, name);
}

const char *cli_temp_file(const char *name, const char *text) {
  static char paths[4][400];
  static size_t next;
  char *path = paths[next++ % 4];
  cli_tmp_path(path, sizeof paths[0], name);
  cli_write(path, text, strlen(text));
  return path;
}

cli_result cli_spawn(const char *in, size_t in_len, const char *const *argv,
                     const char *const *env, bool as_nobody) {
  char in_path[300], out_path[300], err_path[300];
  cli_tmp_path(in_path, sizeof in_path, "stdin");
  cli_tmp_path(out_path, sizeof out_path, "stdout");
  cli_tmp_path(err_path, sizeof err_path, "stderr");
  cli_write(in_path, in != NULL ? in : "", in != NULL ? in_len : 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int i = open(in_path, O_RDONLY), o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600),
        e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(i, 0);
    dup2(o, 1);
    dup2(e, 2);
    if (as_nobody && geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(127);
    if (env != NULL)
      execve(VL_CTL, (char *const *)argv, (char *const *)env);
    else
      execv(VL_CTL, (char *const *)argv);
    _exit(127);
  }
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  cli_result r = {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), NULL, NULL, 0};
  r.out = cli_slurp(out_path, &r.out_len);
  r.err = cli_slurp(err_path, NULL);
  return r;
}

cli_result cli_run(bool local, const char *in_text, const char *const *args) {
  const char *argv[64];
  size_t n = 0;
  argv[n++] = VL_CTL;
  if (local) {
    argv[n++] = "--local";
  } else {
    argv[n++] = "--socket";
    argv[n++] = cli_socket();
  }
  for (; *args != NULL; args++) {
    assert_true(n < 63);
    argv[n++] = *args;
  }
  argv[n] = NULL;
  return cli_spawn(in_text, in_text != NULL ? strlen(in_text) : 0, argv, NULL, false);
}

cli_result cli_both(const char *in_text, const char *const *args, int want_status) {
  cli_result local = cli_run(true, in_text, args), remote = cli_run(false, in_text, args);
  if (local.status != want_status || remote.status != want_status)
    fail_msg("%s: exit %d (local) / %d (daemon), want %d\nlocal stderr: %s\ndaemon stderr: %s",
             args[0], local.status, remote.status, want_status, local.err, remote.err);
  assert_string_equal(local.out, remote.out);
  assert_string_equal(local.err, remote.err);
  cli_result_free(&remote);
  return local;
}

void cli_result_free(cli_result *r) {
  free(r->out);
  free(r->err);
  r->out = r->err = NULL;
}
