/* test_worker.c - `viewlowerctl worker` as Bazel drives it, without Bazel: the real binary reads
 * WorkRequests on stdin (pretty-printed and back to back, as Bazel 4 writes them, or one per
 * line), and its answers, files and exit codes are checked against `viewlowerctl --local`. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "cli_harness.h"

#define EX VL_EXAMPLES_DIR "/graphs/"

/* `viewlowerctl worker --persistent_worker` with the requests in on stdin. */
static cli_result serve(const char *in) {
  const char *argv[] = {VL_CTL, "worker", "--persistent_worker", NULL};
  return cli_spawn(in, strlen(in), argv, NULL, false);
}

/* The responses on stdout, one JSON object per line; each must be exactly the three fields. */
static size_t responses(const cli_result *r, cJSON **out, size_t max) {
  size_t n = 0;
  for (char *line = r->out; line && *line;) {
    char *nl = strchr(line, '\n');
    assert_non_null(nl); /* every response ends its line */
    *nl = '\0';
    assert_true(n < max);
    cJSON *doc = cJSON_Parse(line);
    assert_non_null(doc);
    assert_int_equal(cJSON_GetArraySize(doc), 3);
    assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(doc, "exitCode")));
    assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(doc, "output")));
    assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(doc, "requestId")));
    out[n++] = doc;
    *nl = '\n';
    line = nl + 1;
  }
  return n;
}

static int exit_code(const cJSON *resp) {
  return cJSON_GetObjectItemCaseSensitive(resp, "exitCode")->valueint;
}
static const char *output(const cJSON *resp) {
  return cJSON_GetObjectItemCaseSensitive(resp, "output")->valuestring;
}
static int request_id(const cJSON *resp) {
  return cJSON_GetObjectItemCaseSensitive(resp, "requestId")->valueint;
}

static void free_all(cJSON **docs, size_t n) {
  for (size_t i = 0; i < n; i++) cJSON_Delete(docs[i]);
}

/* What `viewlowerctl --local lower GRAPH [extra]` prints. */
static char *cli_lower(const char *graph, const char *extra) {
  const char *argv[] = {VL_CTL, "--local", "lower", graph, extra, NULL};
  cli_result r = cli_spawn("", 0, argv, NULL, false);
  assert_int_equal(r.status, 0);
  free(r.err);
  return r.out;
}

/* The split files are the lower result's two members, byte for byte: the CLI prints
 * {"graph":G,"report":R}\n, the worker writes G\n and R\n. */
static void assert_split_matches(const char *graph_file, const char *report_file,
                                 const char *lower_text) {
  size_t gn, rn;
  char *g = cli_slurp(graph_file, &gn), *r = cli_slurp(report_file, &rn);
  assert_non_null(g);
  assert_non_null(r);
  assert_true(gn > 1 && g[gn - 1] == '\n' && rn > 1 && r[rn - 1] == '\n');
  size_t cap = gn + rn + 64;
  char *joined = malloc(cap);
  snprintf(joined, cap, "{\"graph\":%.*s,\"report\":%.*s}\n", (int)(gn - 1), g, (int)(rn - 1), r);
  assert_string_equal(joined, lower_text);
  free(joined);
  free(g);
  free(r);
}

/* A WorkRequest for lowering graph into <tmp>/<stem>.json and <stem>.report.json. */
static void lower_request(char *out, size_t cap, const char *graph, const char *stem, int id,
                          bool pretty) {
  snprintf(out, cap,
           pretty ? "{\n  \"arguments\": [\"--graph-out\", \"%s/%s.json\", \"--report-out\", "
                    "\"%s/%s.report.json\", \"lower\", \"%s\"],\n  \"inputs\": [{\n    \"path\": "
                    "\"%s\",\n    \"digest\": \"AAEC\"\n  }],\n  \"requestId\": %d\n}"
                  : "{\"arguments\":[\"--graph-out\",\"%s/%s.json\",\"--report-out\",\"%s/"
                    "%s.report.json\",\"lower\",\"%s\"],\"inputs\":[{\"path\":\"%s\","
                    "\"digest\":\"AAEC\"}],\"requestId\":%d}\n",
           cli_tmpdir, stem, cli_tmpdir, stem, graph, graph, id);
}

static void stem_paths(const char *stem, char *g, char *r, size_t cap) {
  snprintf(g, cap, "%s/%s.json", cli_tmpdir, stem);
  snprintf(r, cap, "%s/%s.report.json", cli_tmpdir, stem);
}

/* The lowered graph and report of stem a have the bytes of stem b's. */
static void assert_same_outputs(const char *a, const char *b) {
  char ga[300], ra[300], gb[300], rb[300];
  stem_paths(a, ga, ra, sizeof ga);
  stem_paths(b, gb, rb, sizeof gb);
  const char *pairs[2][2] = {{ga, gb}, {ra, rb}};
  for (int k = 0; k < 2; k++) {
    char *x = cli_slurp(pairs[k][0], NULL), *y = cli_slurp(pairs[k][1], NULL);
    assert_string_equal(x, y);
    free(x);
    free(y);
  }
}

/* ---- the protocol ---- */

static void pretty_requests_back_to_back_are_each_answered_in_order(void **state) {
  (void)state;
  static const char *graphs[] = {EX "reshape_chain.json", EX "patch_embed.json",
                                 EX "remove_view_copy_model.json", EX "inplace_after_view.json"};
  char in[8192] = "", req[2048];
  for (int i = 0; i < 4; i++) {
    char stem[16];
    snprintf(stem, sizeof stem, "pretty%d", i);
    lower_request(req, sizeof req, graphs[i], stem, 0, true);
    strcat(in, req); /* nothing between two requests, as Bazel 4 writes them */
  }
  cli_result r = serve(in);
  assert_int_equal(r.status, 0);
  cJSON *resp[8];
  size_t n = responses(&r, resp, 8);
  assert_int_equal(n, 4);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(exit_code(resp[i]), 0);
    assert_string_equal(output(resp[i]), "");
    assert_int_equal(request_id(resp[i]), 0);
    char stem[16], g[300], rep[300];
    snprintf(stem, sizeof stem, "pretty%d", i);
    stem_paths(stem, g, rep, sizeof g);
    char *want = cli_lower(graphs[i], NULL);
    assert_split_matches(g, rep, want);
    free(want);
  }
  /* one process served all four: its log lines on stderr name the same pid */
  long pid = 0;
  int lines = 0;
  for (const char *p = r.err; (p = strstr(p, "viewlowerctl worker (pid ")) != NULL; p++, lines++) {
    long this_pid = strtol(p + strlen("viewlowerctl worker (pid "), NULL, 10);
    assert_true(this_pid > 0 && (pid == 0 || this_pid == pid));
    pid = this_pid;
  }
  assert_int_equal(lines, 4);
  assert_non_null(strstr(r.err, "): request 4 (id 0): lower " EX "inplace_after_view.json\n"));
  free_all(resp, n);
  cli_result_free(&r);
}

static void options_reach_the_lowering(void **state) {
  (void)state;
  char in[2048];
  snprintf(in, sizeof in,
           "{\"arguments\":[\"--report-out\",\"%s/kept.report.json\",\"lower\",\"%s\","
           "\"--keep-view-copy\"]}\n",
           cli_tmpdir, EX "patch_embed.json");
  cli_result r = serve(in);
  cJSON *resp[2];
  assert_int_equal(responses(&r, resp, 2), 1);
  assert_int_equal(exit_code(resp[0]), 0);
  char path[300];
  snprintf(path, sizeof path, "%s/kept.report.json", cli_tmpdir);
  char *report = cli_slurp(path, NULL);
  assert_non_null(report);
  assert_non_null(strstr(report, "\"reasons\":[\"disabled\"]"));
  assert_non_null(strstr(report, "\"replaced\":0,"));
  free(report);
  free_all(resp, 1);
  cli_result_free(&r);
}

static void multiplexed_requests_are_each_answered_once_with_their_id(void **state) {
  (void)state;
  enum { N = 12 };
  static const char *graphs[] = {EX "reshape_chain.json", EX "patch_embed.json",
                                 EX "remove_view_copy_model.json", EX "inplace_after_view.json"};
  char in[N * 512] = "", req[512];
  for (int i = 0; i < N; i++) {
    /* verify under legacy: patch_embed and inplace_after_view mismatch (exit 1), the others
     * are equal (exit 0); each answer must carry its own request's cli_result */
    snprintf(req, sizeof req,
             "{\"requestId\":%d,\"arguments\":[\"verify\",\"%s\",\"--policy\",\"legacy\"]}\n",
             100 + i, graphs[i % 4]);
    strcat(in, req);
  }
  cli_result r = serve(in);
  assert_int_equal(r.status, 0);
  cJSON *resp[N + 1];
  size_t n = responses(&r, resp, N + 1);
  assert_int_equal(n, N);
  bool seen[N] = {false};
  for (size_t k = 0; k < n; k++) {
    int i = request_id(resp[k]) - 100;
    assert_true(i >= 0 && i < N && !seen[i]);
    seen[i] = true;
    bool mismatch = i % 4 == 1 || i % 4 == 3;
    assert_int_equal(exit_code(resp[k]), mismatch ? 1 : 0);
    assert_non_null(strstr(output(resp[k]), mismatch ? "{\"equal\":false," : "{\"equal\":true,"));
  }
  free_all(resp, n);
  cli_result_free(&r);
}

static void a_request_leaves_nothing_behind_for_the_next(void **state) {
  (void)state;
  /* the same lowering before and after a failing request and a mismatching verify: identical
   * bytes, identical answers */
  char a[2048], b[2048], in[8192];
  lower_request(a, sizeof a, EX "remove_view_copy_model.json", "again1", 0, false);
  lower_request(b, sizeof b, EX "remove_view_copy_model.json", "again2", 0, false);
  snprintf(in, sizeof in,
           "%s{\"arguments\":[\"lower\",\"%s/missing.json\"]}\n"
           "{\"arguments\":[\"verify\",\"%s\",\"--policy\",\"legacy\"]}\n%s",
           a, cli_tmpdir, EX "inplace_after_view.json", b);
  cli_result r = serve(in);
  cJSON *resp[8];
  size_t n = responses(&r, resp, 8);
  assert_int_equal(n, 4);
  assert_int_equal(exit_code(resp[0]), 0);
  assert_int_equal(exit_code(resp[1]), 2);
  assert_non_null(strstr(output(resp[1]), "missing.json: cannot open"));
  assert_int_equal(exit_code(resp[2]), 1);
  assert_int_equal(exit_code(resp[3]), 0);
  assert_same_outputs("again1", "again2");
  free_all(resp, n);
  cli_result_free(&r);
}

static void paths_are_relative_to_the_sandbox_dir(void **state) {
  (void)state;
  /* a multiplex sandbox: the request's relative paths are under sandboxDir */
  char dir[300], graph[400], in[1024];
  snprintf(dir, sizeof dir, "%s/sandbox", cli_tmpdir);
  assert_int_equal(mkdir(dir, 0700), 0);
  snprintf(graph, sizeof graph, "%s/g.json", dir);
  size_t n;
  char *text = cli_slurp(EX "reshape_chain.json", &n);
  cli_write(graph, text, n);
  free(text);
  snprintf(in, sizeof in,
           "{\"requestId\":9,\"sandboxDir\":\"%s\",\"arguments\":[\"--graph-out\",\"out.json\","
           "\"--report-out\",\"out.report.json\",\"lower\",\"g.json\"]}",
           dir);
  cli_result r = serve(in);
  cJSON *resp[2];
  assert_int_equal(responses(&r, resp, 2), 1);
  assert_int_equal(exit_code(resp[0]), 0);
  assert_int_equal(request_id(resp[0]), 9);
  char g[400], rep[400];
  snprintf(g, sizeof g, "%s/out.json", dir);
  snprintf(rep, sizeof rep, "%s/out.report.json", dir);
  char *want = cli_lower(EX "reshape_chain.json", NULL);
  assert_split_matches(g, rep, want);
  free(want);
  free_all(resp, 1);
  cli_result_free(&r);
}

static void the_worker_writes_what_the_one_shot_run_writes(void **state) {
  (void)state;
  char req[2048], args[1024], argsfile[300];
  lower_request(req, sizeof req, EX "patch_embed.json", "served", 0, false);
  cli_result r = serve(req);
  assert_int_equal(r.status, 0);
  cli_result_free(&r);
  /* Without workers Bazel runs `viewlowerctl worker @ARGSFILE`, one argument per line. */
  snprintf(args, sizeof args,
           "--graph-out\n%s/oneshot.json\n--report-out\n%s/oneshot.report.json\n"
           "lower\n%s\n",
           cli_tmpdir, cli_tmpdir, EX "patch_embed.json");
  cli_tmp_path(argsfile, sizeof argsfile, "oneshot.params");
  cli_write(argsfile, args, strlen(args));
  char at[400];
  snprintf(at, sizeof at, "@%s", argsfile);
  const char *argv[] = {VL_CTL, "worker", at, NULL};
  r = cli_spawn("", 0, argv, NULL, false);
  assert_int_equal(r.status, 0);
  assert_string_equal(r.out, "");
  assert_string_equal(r.err, "");
  cli_result_free(&r);
  assert_same_outputs("served", "oneshot");
}

static void one_shot_exit_codes_are_the_commands(void **state) {
  (void)state;
  char argsfile[300], at[400];
  cli_tmp_path(argsfile, sizeof argsfile, "verify.params");
  snprintf(at, sizeof at, "--flagfile=%s", argsfile);
  const char *argv[] = {VL_CTL, "worker", at, NULL};
  const char *legacy = "verify\n" EX "inplace_after_view.json\n--policy\nlegacy";
  cli_write(argsfile, legacy, strlen(legacy)); /* no newline after the last argument */
  cli_result r = cli_spawn("", 0, argv, NULL, false);
  assert_int_equal(r.status, 1); /* a mismatch, as verify's own exit code */
  assert_non_null(strstr(r.out, "{\"equal\":false,"));
  cli_result_free(&r);
  cli_write(argsfile, "stats\n", 6);
  r = cli_spawn("", 0, argv, NULL, false);
  assert_int_equal(r.status, 64);
  assert_non_null(strstr(r.err, "request /arguments/0: not a command a request may run"));
  cli_result_free(&r);
  snprintf(at, sizeof at, "@%s/no-such.params", cli_tmpdir);
  r = cli_spawn("", 0, argv, NULL, false);
  assert_int_equal(r.status, 2);
  assert_non_null(strstr(r.err, "no-such.params: cannot open"));
  cli_result_free(&r);
}

static void worker_usage_errors_exit_64(void **state) {
  (void)state;
  const char *none[] = {VL_CTL, "worker", NULL};
  const char *extra[] = {VL_CTL, "worker", "--persistent_worker", "x", NULL};
  const char *sock[] = {VL_CTL, "--socket", "/tmp/s", "worker", "--persistent_worker", NULL};
  const char *const *cases[] = {none, extra, sock};
  for (size_t i = 0; i < 3; i++) {
    cli_result r = cli_spawn("", 0, cases[i], NULL, false);
    assert_int_equal(r.status, 64);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "worker"));
    cli_result_free(&r);
  }
}

/* ---- hostile input ---- */

/* Each bad request gets one answer naming what is wrong, and the worker goes on to serve the
 * good request after it. */
static void bad_requests_are_answered_and_the_worker_goes_on(void **state) {
  (void)state;
  static const struct {
    const char *request;
    int exit_code, id;
    const char *message;
  } cases[] = {
      {"{\"arguments\":[}", 2, 0, "malformed WorkRequest at byte"},
      {"{\"arguments\":\"lower\"}", 2, 0, "request /arguments: not an array of strings"},
      {"{\"arguments\":[\"lower\",7]}", 2, 0, "request /arguments/1: not a string"},
      {"{\"requestId\":-1,\"arguments\":[\"ping\"]}", 2, 0,
       "request /requestId: not a whole number in [0, 2^31-1]"},
      {"{\"requestId\":1.5,\"arguments\":[\"ping\"]}", 2, 0, "request /requestId: not a whole"},
      {"{\"requestId\":3,\"requestId\":4}", 2, 0, "request /requestId: given twice"},
      /* numbers JSON forbids are refused by the strict parser, never read as 1 or 2 */
      {"{\"requestId\":01,\"arguments\":[\"ping\"]}", 2, 0,
       "malformed WorkRequest at byte 13 of standard input (JSON, RFC 8259): a number may not "
       "have a leading zero"},
      {"{\"requestId\":2.,\"arguments\":[\"ping\"]}", 2, 0,
       "byte 13 of standard input (JSON, RFC 8259): a digit must follow the decimal point"},
      {"{\"requestId\":1.e2,\"arguments\":[\"ping\"]}", 2, 0,
       "a digit must follow the decimal point"},
      {"{\"arguments\":[]}", 64, 0, "request /arguments: a command is required"},
      {"{\"arguments\":[\"--socket\",\"/tmp/s\",\"ping\"]}", 64, 0,
       "request /arguments/0: only --graph-out and --report-out may come before the command"},
      {"{\"requestId\":5,\"arguments\":[\"worker\",\"--persistent_worker\"]}", 64, 5,
       "request /arguments/0: not a command a request may run"},
      {"{\"arguments\":[\"--graph-out\",\"g.json\",\"verify\",\"x.json\"]}", 64, 0,
       "request /arguments/2: --graph-out and --report-out go with lower only"},
      {"{\"arguments\":[\"--graph-out\"]}", 64, 0, "request /arguments/0: needs a file name"},
      {"{\"arguments\":[\"--report-out\",\"r.json\",\"lower\",\"x.json\",\"-o\",\"y\"]}", 64, 0,
       "-o and --graph-out/--report-out exclude each other"},
      {"[\"lower\"]", 2, 0, "not a JSON WorkRequest object"},
      {"{\"sandboxDir\":7,\"arguments\":[\"ping\"]}", 2, 0, "request /sandboxDir: not a directory"},
      {"{\"sandboxDir\":\"/no/such/dir\",\"arguments\":[\"ping\"]}", 2, 0,
       "sandbox directory /no/such/dir: No such file or directory"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char in[1024];
    snprintf(in, sizeof in, "%s\n{\"arguments\":[\"ping\"]}\n", cases[i].request);
    cli_result r = serve(in);
    assert_int_equal(r.status, 0);
    cJSON *resp[4];
    size_t n = responses(&r, resp, 4);
    if (n != 2 || exit_code(resp[0]) != cases[i].exit_code ||
        strstr(output(resp[0]), cases[i].message) == NULL)
      fail_msg("case %zu (%s): got %s", i, cases[i].request, r.out);
    assert_int_equal(request_id(resp[0]), cases[i].id);
    assert_int_equal(exit_code(resp[1]), 0);
    assert_string_equal(output(resp[1]), "{\"pong\":true}\n");
    free_all(resp, n);
    cli_result_free(&r);
  }
}

static void a_request_over_the_size_limit_is_refused_and_skipped(void **state) {
  (void)state;
  size_t big = ((size_t)4 << 20) + 100;
  char *in = malloc(big + 200);
  size_t n = (size_t)sprintf(in, "{\"arguments\":[\"ping\",\"");
  memset(in + n, 'a', big);
  n += big;
  n += (size_t)sprintf(in + n, "\"]}{\"arguments\":[\"ping\"]}");
  const char *argv[] = {VL_CTL, "worker", "--persistent_worker", NULL};
  cli_result r = cli_spawn(in, n, argv, NULL, false);
  free(in);
  assert_int_equal(r.status, 0);
  cJSON *resp[4];
  size_t k = responses(&r, resp, 4);
  assert_int_equal(k, 2);
  assert_int_equal(exit_code(resp[0]), 2);
  assert_non_null(strstr(output(resp[0]), "is larger than 4194304 bytes"));
  assert_int_equal(exit_code(resp[1]), 0);
  free_all(resp, k);
  cli_result_free(&r);
}

static void bytes_that_are_not_json_are_answered_not_fatal(void **state) {
  (void)state;
  /* A protobuf-framed request (what a worker gets when the action lacks
   * requires-worker-protocol: json), then a JSON one. */
  static const char in[] = "\x0a\x04ping\x10\x01{\"arguments\":[\"ping\"]}";
  const char *argv[] = {VL_CTL, "worker", "--persistent_worker", NULL};
  cli_result r = cli_spawn(in, sizeof in - 1, argv, NULL, false);
  assert_int_equal(r.status, 0);
  cJSON *resp[4];
  size_t k = responses(&r, resp, 4);
  assert_int_equal(k, 2);
  assert_int_equal(exit_code(resp[0]), 2);
  assert_non_null(
      strstr(output(resp[0]), "bytes 1 to 7 of standard input are not a JSON WorkRequest"));
  assert_non_null(strstr(r.err, "requires-worker-protocol: json"));
  assert_int_equal(exit_code(resp[1]), 0);
  free_all(resp, k);
  cli_result_free(&r);
}

static void output_with_invalid_utf8_is_still_json(void **state) {
  (void)state;
  /* a file name with the byte 0xff (valid in a file name, not in UTF-8) echoed in the error */
  char in[512];
  snprintf(in, sizeof in, "{\"arguments\":[\"lower\",\"%s/bad\\u00ff.json\"]}", cli_tmpdir);
  cli_result r = serve(in);
  cJSON *resp[2];
  assert_int_equal(responses(&r, resp, 2), 1);
  assert_int_equal(exit_code(resp[0]), 2);
  assert_non_null(strstr(output(resp[0]), "bad\xc3\xbf.json: cannot open"));
  free_all(resp, 1);
  cli_result_free(&r);
  /* raw 0xff in the request's text: the answer is still valid JSON, the byte shown as '?' */
  static const char raw[] = "{\"arguments\":[\"lower\",\"bad\xff.json\"]}";
  const char *argv[] = {VL_CTL, "worker", "--persistent_worker", NULL};
  r = cli_spawn(raw, sizeof raw - 1, argv, NULL, false);
  assert_int_equal(responses(&r, resp, 2), 1);
  assert_int_equal(exit_code(resp[0]), 2);
  assert_non_null(strstr(output(resp[0]), "bad?.json: cannot open"));
  free_all(resp, 1);
  cli_result_free(&r);
}

static void deep_nesting_and_a_truncated_request_do_not_crash(void **state) {
  (void)state;
  enum { DEPTH = 200000 };
  char *in = malloc(2 * DEPTH + 64);
  size_t n = (size_t)sprintf(in, "{\"x\":");
  memset(in + n, '[', DEPTH);
  n += DEPTH;
  memset(in + n, ']', DEPTH);
  n += DEPTH;
  n += (size_t)sprintf(in + n, "}{\"arguments\":[\"ping\"]}{\"arguments\":[\"pi");
  const char *argv[] = {VL_CTL, "worker", "--persistent_worker", NULL};
  cli_result r = cli_spawn(in, n, argv, NULL, false);
  free(in);
  assert_int_equal(r.status, 2); /* stdin ended inside a request */
  assert_non_null(strstr(r.err, "standard input ended inside a WorkRequest"));
  cJSON *resp[4];
  size_t k = responses(&r, resp, 4);
  assert_int_equal(k, 2);
  assert_int_equal(exit_code(resp[0]), 2);
  assert_non_null(strstr(output(resp[0]), "malformed WorkRequest"));
  assert_int_equal(exit_code(resp[1]), 0);
  free_all(resp, k);
  cli_result_free(&r);
}

static void no_requests_is_a_clean_exit(void **state) {
  (void)state;
  cli_result r = serve(" \n\t");
  assert_int_equal(r.status, 0);
  assert_string_equal(r.out, "");
  assert_string_equal(r.err, "");
  cli_result_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pretty_requests_back_to_back_are_each_answered_in_order),
      cmocka_unit_test(options_reach_the_lowering),
      cmocka_unit_test(multiplexed_requests_are_each_answered_once_with_their_id),
      cmocka_unit_test(a_request_leaves_nothing_behind_for_the_next),
      cmocka_unit_test(paths_are_relative_to_the_sandbox_dir),
      cmocka_unit_test(the_worker_writes_what_the_one_shot_run_writes),
      cmocka_unit_test(one_shot_exit_codes_are_the_commands),
      cmocka_unit_test(worker_usage_errors_exit_64),
      cmocka_unit_test(bad_requests_are_answered_and_the_worker_goes_on),
      cmocka_unit_test(a_request_over_the_size_limit_is_refused_and_skipped),
      cmocka_unit_test(bytes_that_are_not_json_are_answered_not_fatal),
      cmocka_unit_test(output_with_invalid_utf8_is_still_json),
      cmocka_unit_test(deep_nesting_and_a_truncated_request_do_not_crash),
      cmocka_unit_test(no_requests_is_a_clean_exit),
  };
  return cli_exit_status(cmocka_run_group_tests(tests, cli_group_setup, cli_group_teardown));
}
