/* test_cli.c - viewlowerctl as a user runs it: outputs, error lines and exit codes, each
 * checked in process (--local) and through a real viewlowerd, which must agree. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#define EX VL_EXAMPLES_DIR "/graphs/"

static char tmpdir[256];
static char sock[300];
static pid_t daemon_pid;

typedef struct {
  int status;
  char *out;
  char *err;
} result;

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return strdup("");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  size_t got = fread(buf, 1, (size_t)n, f);
  buf[got] = '\0';
  fclose(f);
  return buf;
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* Runs viewlowerctl with mode args ("--local" or "--socket S") + args; stdin from in_text. */
static result run(bool local, const char *in_text, const char *const *args) {
  char out_path[400], err_path[400], in_path[400];
  snprintf(out_path, sizeof out_path, "%s/stdout", tmpdir);
  snprintf(err_path, sizeof err_path, "%s/stderr", tmpdir);
  snprintf(in_path, sizeof in_path, "%s/stdin", tmpdir);
  write_file(in_path, in_text ? in_text : "");
  const char *argv[64];
  size_t n = 0;
  argv[n++] = VL_CTL;
  if (local) {
    argv[n++] = "--local";
  } else {
    argv[n++] = "--socket";
    argv[n++] = sock;
  }
  for (; *args && n < 63; args++) argv[n++] = *args;
  argv[n] = NULL;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int in = open(in_path, O_RDONLY), out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600),
        err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    execv(VL_CTL, (char *const *)argv);
    _exit(127);
  }
  int st;
  waitpid(pid, &st, 0);
  result r = {WIFEXITED(st) ? WEXITSTATUS(st) : 128, slurp(out_path), slurp(err_path)};
  return r;
}

static void drop(result *r) {
  free(r->out);
  free(r->err);
}

/* Runs in both modes; asserts the same exit status, stdout and stderr; returns the local one. */
static result both(const char *in_text, const char *const *args, int want_status) {
  result local = run(true, in_text, args), remote = run(false, in_text, args);
  if (local.status != want_status || remote.status != want_status)
    fail_msg("%s: exit %d (local) / %d (daemon), want %d\nlocal stderr: %s\ndaemon stderr: %s",
             args[0], local.status, remote.status, want_status, local.err, remote.err);
  assert_string_equal(local.out, remote.out);
  assert_string_equal(local.err, remote.err);
  drop(&remote);
  return local;
}

static int start_daemon(void **state) {
  (void)state;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/vlcli.XXXXXX");
  if (mkdtemp(tmpdir) == NULL) return -1;
  snprintf(sock, sizeof sock, "%s/d.sock", tmpdir);
  daemon_pid = fork();
  if (daemon_pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    execl(VL_DAEMON, VL_DAEMON, "--socket", sock, "--log-level", "error", (char *)NULL);
    _exit(127);
  }
  for (int i = 0; i < 200; i++) {
    struct stat sb;
    if (stat(sock, &sb) == 0 && S_ISSOCK(sb.st_mode)) return 0;
    struct timespec ts = {0, 25 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return -1;
}

/* cmocka does not count a failed group teardown in its result; main adds it. */
static bool teardown_failed;

static int stop_daemon(void **state) {
  (void)state;
  kill(daemon_pid, SIGTERM);
  int st;
  waitpid(daemon_pid, &st, 0);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  teardown_failed = !(system(cmd) == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  return teardown_failed ? -1 : 0;
}

static void validate_prints_the_graph_with_full_vals(void **state) {
  (void)state;
  result r = both(NULL, (const char *[]){"validate", EX "reshape_chain.json", NULL}, 0);
  cJSON *g = cJSON_Parse(r.out);
  assert_non_null(g);
  cJSON *val = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(g, "nodes"), 0), "val");
  char *text = cJSON_PrintUnformatted(val);
  assert_string_equal(text, "{\"dtype\":\"float32\",\"shape\":[2,3,4],\"dim_order\":[0,1,2]}");
  free(text);
  cJSON_Delete(g);
  assert_string_equal(r.err, "");
  drop(&r);
}

static const char *bad_graph =
    "{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":["
    "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"int8\",\"shape\":[2,3,4,5],"
    "\"dim_order\":[0,1,1,3]}},{\"name\":\"out\",\"op\":\"output\",\"args\":[\"x\"]}]}";

static void an_invalid_graph_is_one_line_with_the_pointer_and_exit_2(void **state) {
  (void)state;
  result r = both(bad_graph, (const char *[]){"validate", "-", NULL}, 2);
  assert_string_equal(r.err,
                      "viewlowerctl: -: /nodes/0/val/dim_order: not a permutation of 0..3\n");
  assert_string_equal(r.out, "");
  drop(&r);
  r = both("{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":[{\"name\":\"x\\u0000y\"}]}",
           (const char *[]){"validate", "-", NULL}, 2);
  assert_non_null(strstr(r.err, "\\u0000 is not allowed"));
  drop(&r);
  r = both("{\"format\":", (const char *[]){"lower", "-", NULL}, 2);
  assert_non_null(strstr(r.err, "malformed JSON"));
  drop(&r);
}

static void usage_errors_exit_64(void **state) {
  (void)state;
  result r = run(true, NULL, (const char *[]){NULL});
  assert_int_equal(r.status, 64);
  drop(&r);
  r = run(true, NULL, (const char *[]){"frobnicate", NULL});
  assert_int_equal(r.status, 64);
  drop(&r);
  r = run(true, NULL, (const char *[]){"lower", EX "patch_embed.json", "--policy", "fast", NULL});
  assert_int_equal(r.status, 64);
  drop(&r);
  r = run(true, NULL, (const char *[]){"view-copy", "-", "--size", "1,x", NULL});
  assert_int_equal(r.status, 64);
  drop(&r);
  r = run(true, NULL, (const char *[]){"stats", NULL});
  assert_int_equal(r.status, 64);
  drop(&r);
}

static void lower_keeps_the_patch_embedding_copy_and_explains_why(void **state) {
  (void)state;
  result r = both(NULL, (const char *[]){"lower", EX "patch_embed.json", NULL}, 0);
  cJSON *j = cJSON_Parse(r.out);
  cJSON *report = cJSON_GetObjectItem(j, "report");
  assert_int_equal(cJSON_GetObjectItem(report, "kept")->valueint, 1);
  char *reasons = cJSON_PrintUnformatted(cJSON_GetObjectItem(
      cJSON_GetArrayItem(cJSON_GetObjectItem(report, "decisions"), 0), "reasons"));
  assert_string_equal(reasons, "[\"base_layout\"]");
  free(reasons);
  cJSON_Delete(j);
  drop(&r);
  r = both(NULL, (const char *[]){"explain", EX "patch_embed.json", NULL}, 0);
  assert_non_null(strstr(r.out, "flat"));
  assert_non_null(strstr(r.out, "base_layout"));
  assert_non_null(strstr(r.out, "1 view_copy nodes: 0 replaced, 1 kept"));
  drop(&r);
}

static void lower_of_several_graphs_writes_one_result_per_input(void **state) {
  (void)state;
  const char *files[] = {"lower", EX "patch_embed.json", EX "reshape_chain.json",
                         EX "remove_view_copy_model.json", NULL};
  result r = both(NULL, files, 0);
  int lines = 0;
  for (const char *p = r.out; *p; p++) lines += *p == '\n';
  assert_int_equal(lines, 3);
  assert_non_null(strstr(r.out, "\"name\":\"patch_embed\""));
  assert_true(strstr(r.out, "patch_embed") < strstr(r.out, "reshape_chain"));
  drop(&r);
  char dir[400];
  snprintf(dir, sizeof dir, "%s/lowered", tmpdir);
  r = run(
      false, NULL,
      (const char *[]){"lower", EX "patch_embed.json", EX "reshape_chain.json", "-o", dir, NULL});
  assert_int_equal(r.status, 0);
  drop(&r);
  char path[500];
  snprintf(path, sizeof path, "%s/reshape_chain.json", dir);
  char *text = slurp(path);
  cJSON *j = cJSON_Parse(text);
  assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "report"), "removed_dead")->valueint,
                   3);
  cJSON_Delete(j);
  free(text);
}

static void verify_is_equal_under_safe_and_exits_1_under_legacy(void **state) {
  (void)state;
  result r = both(NULL, (const char *[]){"verify", EX "patch_embed.json", "--seed", "7", NULL}, 0);
  assert_non_null(strstr(r.out, "\"equal\":true"));
  drop(&r);
  r = both(
      NULL,
      (const char *[]){"verify", EX "patch_embed.json", "--seed", "7", "--policy", "legacy", NULL},
      1);
  assert_non_null(strstr(r.out, "\"equal\":false"));
  drop(&r);
}

static void run_gives_the_exact_patch_embedding_tokens(void **state) {
  (void)state;
  char inputs[400];
  snprintf(inputs, sizeof inputs, "%s/inputs.json", tmpdir);
  write_file(inputs, "{\"x\":{\"dtype\":\"float32\",\"shape\":[1,2,2,3],"
                     "\"values\":[0,1,2,3,4,5,6,7,8,9,10,11]}}");
  result r =
      both(NULL, (const char *[]){"run", EX "patch_embed.json", "--inputs", inputs, NULL}, 0);
  assert_string_equal(
      r.out, "{\"outputs\":[{\"dtype\":\"float32\",\"shape\":[1,6,2],\"dim_order\":[0,1,2],"
             "\"values\":[0,6,1,7,2,8,3,9,4,10,5,11]}]}\n");
  drop(&r);
  r = both(NULL,
           (const char *[]){"run", EX "patch_embed.json", "--inputs", inputs, "--encoding",
                            "base64", NULL},
           0);
  assert_non_null(strstr(r.out, "\"data\":\""));
  drop(&r);
}

static void view_copy_reads_channels_last_in_logical_order(void **state) {
  (void)state;
  const char *t = "{\"dtype\":\"float32\",\"shape\":[1,2,2,3],\"dim_order\":[0,2,3,1],"
                  "\"values\":[0,1,2,3,4,5,6,7,8,9,10,11]}";
  result r = both(t, (const char *[]){"view-copy", "-", "--size", "1,2,-1", NULL}, 0);
  assert_string_equal(r.out, "{\"dtype\":\"float32\",\"shape\":[1,2,6],\"dim_order\":[0,1,2],"
                             "\"values\":[0,1,2,3,4,5,6,7,8,9,10,11]}\n");
  drop(&r);
  r = both(t, (const char *[]){"view-copy", "-", "--size", "1,-1,-1", NULL}, 2);
  assert_non_null(strstr(r.err, "viewlowerctl: --size: "));
  drop(&r);
  r = both("{\"dtype\":\"float32\",\"shape\":[2],\"values\":[1]}",
           (const char *[]){"view-copy", "-", "--size", "2", NULL}, 2);
  assert_non_null(strstr(r.err, "viewlowerctl: -: /values"));
  drop(&r);
}

static void an_unsupported_target_is_invalid_input(void **state) {
  (void)state;
  const char *g =
      "{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":["
      "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":[2]}},"
      "{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"aten.sin.default\",\"args\":[\"x\"],"
      "\"val\":{\"dtype\":\"float32\",\"shape\":[2]}},"
      "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"y\"]}]}";
  result r = both(g, (const char *[]){"verify", "-", NULL}, 2);
  assert_non_null(strstr(r.err, "/nodes/1/target"));
  assert_non_null(strstr(r.err, "aten.sin.default"));
  drop(&r);
}

static void ping_version_and_stats_answer(void **state) {
  (void)state;
  result r = both(NULL, (const char *[]){"ping", NULL}, 0);
  assert_string_equal(r.out, "{\"pong\":true}\n");
  drop(&r);
  r = run(false, NULL, (const char *[]){"stats", NULL});
  assert_int_equal(r.status, 0);
  cJSON *stats = cJSON_Parse(r.out);
  assert_non_null(stats);
  cJSON_Delete(stats);
  drop(&r);
}

static void an_absent_daemon_exits_3(void **state) {
  (void)state;
  const char *argv[] = {VL_CTL, "--socket", "/nonexistent/viewlower.sock", "ping", NULL};
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    execv(VL_CTL, (char *const *)argv);
    _exit(127);
  }
  int st;
  waitpid(pid, &st, 0);
  assert_int_equal(WEXITSTATUS(st), 3);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(validate_prints_the_graph_with_full_vals),
      cmocka_unit_test(an_invalid_graph_is_one_line_with_the_pointer_and_exit_2),
      cmocka_unit_test(usage_errors_exit_64),
      cmocka_unit_test(lower_keeps_the_patch_embedding_copy_and_explains_why),
      cmocka_unit_test(lower_of_several_graphs_writes_one_result_per_input),
      cmocka_unit_test(verify_is_equal_under_safe_and_exits_1_under_legacy),
      cmocka_unit_test(run_gives_the_exact_patch_embedding_tokens),
      cmocka_unit_test(view_copy_reads_channels_last_in_logical_order),
      cmocka_unit_test(an_unsupported_target_is_invalid_input),
      cmocka_unit_test(ping_version_and_stats_answer),
      cmocka_unit_test(an_absent_daemon_exits_3),
  };
  int failed = cmocka_run_group_tests(tests, start_daemon, stop_daemon);
  if (teardown_failed) fprintf(stderr, "viewlowerd did not exit 0 after SIGTERM\n");
  return failed != 0 || teardown_failed ? 1 : 0;
}
