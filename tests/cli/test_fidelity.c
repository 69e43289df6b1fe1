/* test_fidelity.c - literals survive viewlowerctl exactly (docs/format.md §2, "Literals are
 * exact"), run as a user runs it: validate, lower and run, each in process (--local) and through a
 * real viewlowerd, which must print the same bytes. */
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

#include <cmocka.h>

#include "cli_harness.h"

#define DATA VL_TESTDATA_DIR "/"

/* Both modes, exit 0 and the same stdout and stderr; returns the local stdout (caller frees). */
static char *both(const char *const *args) {
  cli_result local = cli_both(NULL, args, 0);
  free(local.err);
  return local.out;
}

/* The text of the node named name in printed graph text (from its '{' to its '}'). */
static char *node_text(const char *graph, const char *name) {
  char key[128];
  snprintf(key, sizeof key, "{\"name\":\"%s\",", name);
  const char *start = strstr(graph, key);
  if (start == NULL) fail_msg("no node %s in %s", name, graph);
  int depth = 0;
  const char *p = start;
  for (bool in_string = false; *p; p++) {
    if (in_string) {
      if (*p == '\\') p++;
      else if (*p == '"') in_string = false;
    } else if (*p == '"') {
      in_string = true;
    } else if (*p == '{') {
      depth++;
    } else if (*p == '}' && --depth == 0) {
      break;
    }
  }
  return strndup(start, (size_t)(p - start + 1));
}

static void assert_same_node(const char *a, const char *b, const char *name) {
  char *x = node_text(a, name), *y = node_text(b, name);
  assert_string_equal(x, y);
  free(x);
  free(y);
}

/* The fixture in the printer's own form: INT64_MAX slice ends, INT64_MIN, 2^53 + 1, 17-digit
 * floats, 2.0, -0.0, 5e-324, inf/-inf/nan literals, a batch norm with vals and getitems. */
static void validate_prints_every_literal_back_unchanged(void **state) {
  (void)state;
  char *want = cli_slurp(DATA "fidelity_canonical.json", NULL);
  char *got = both((const char *const[]){"validate", DATA "fidelity_canonical.json", NULL});
  assert_string_equal(got, want);
  assert_non_null(strstr(got, "\"args\":[\"x\",0,0,9223372036854775807,1]"));
  assert_non_null(strstr(got, "[9223372036854775807,-9223372036854775808,9007199254740993,0]"));
  assert_non_null(strstr(got, "[2.0,-0.0,1e-05,1.7976931348623157e+308,5e-324,0.1,"
                              "1.2345678901234568e+17]"));
  assert_non_null(strstr(got, "[{\"float\":\"inf\"},{\"float\":\"-inf\"},{\"float\":\"nan\"}]"));
  assert_non_null(strstr(got, "\"args\":[\"getitem\",0.30000000000000004]"));
  free(got);
  free(want);
}

/* Lowering rewrites its own nodes only: every other node prints as validate printed it. */
static void lower_changes_no_literal_in_either_mode(void **state) {
  (void)state;
  char *canon = cli_slurp(DATA "fidelity_canonical.json", NULL);
  char *folded = both((const char *const[]){"lower", DATA "fidelity_canonical.json", NULL});
  char *plain =
      both((const char *const[]){"lower", DATA "fidelity_canonical.json", "--no-fold", NULL});
  static const char *const untouched[] = {"x", "w", "rm", "bn", "getitem", "getitem_2", "m",
                                          "lit", "out"};
  for (size_t i = 0; i < sizeof untouched / sizeof *untouched; i++) {
    assert_same_node(canon, folded, untouched[i]);
    assert_same_node(canon, plain, untouched[i]);
  }
  /* Without folding the slice stays a copy, INT64_MAX end and all. */
  assert_same_node(canon, plain, "sl");
  char *v = node_text(plain, "v");
  assert_string_equal(v, "{\"name\":\"v\",\"op\":\"call_function\",\"target\":\"memory.view\","
                         "\"args\":[\"m\",[2,-1]],\"alias_of\":\"m\",\"val\":{\"dtype\":"
                         "\"float64\",\"shape\":[2,12],\"dim_order\":[0,1]}}");
  free(v);
  /* The lowered graph lowers to itself, literals included. */
  const char *start = strstr(plain, "{\"format\"");
  const char *end = strstr(plain, ",\"report\":");
  assert_non_null(start);
  assert_non_null(end);
  char *graph = strndup(start, (size_t)(end - start));
  const char *path = cli_temp_file("lowered.json", graph);
  char *again = both((const char *const[]){"validate", path, NULL});
  assert_memory_equal(again, graph, strlen(graph));
  free(again);
  free(graph);
  free(plain);
  free(folded);
  free(canon);
}

#define MUL_GRAPH(lit)                                                                             \
  "{\"format\":\"viewlower.graph\",\"version\":1,\"nodes\":["                                     \
  "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float64\",\"shape\":[4]}},"       \
  "{\"name\":\"m\",\"op\":\"call_function\",\"target\":\"aten.mul.Tensor\",\"args\":[\"x\","     \
  lit "],\"val\":{\"dtype\":\"float64\",\"shape\":[4]}},"                                         \
  "{\"name\":\"v\",\"op\":\"call_function\",\"target\":\"aten.view_copy.default\","               \
  "\"args\":[\"m\",[2,2]],\"val\":{\"dtype\":\"float64\",\"shape\":[2,2]}},"                       \
  "{\"name\":\"r\",\"op\":\"call_function\",\"target\":\"aten.relu.default\",\"args\":[\"v\"],"  \
  "\"val\":{\"dtype\":\"float64\",\"shape\":[2,2]}},"                                              \
  "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"r\"]}]}"

/* aten.mul.Tensor(x, 0.30000000000000004): the lowered graph runs to the same bits as the
 * original (a printer that wrote 0.3 would not: 3 * 0.3 is 0.8999999999999999). */
static void run_of_the_lowered_graph_gives_the_same_bits(void **state) {
  (void)state;
  const char *inputs = cli_temp_file("inputs.json", "{\"x\":{\"dtype\":\"float64\",\"shape\":[4],"
                                                "\"values\":[1,3,7,10]}}");
  const char *graph = cli_temp_file("mul.json", MUL_GRAPH("0.30000000000000004"));
  char *lowered = both((const char *const[]){"lower", graph, NULL});
  assert_non_null(strstr(lowered, "\"target\":\"memory.view\""));
  const char *start = strstr(lowered, "{\"format\"");
  const char *end = strstr(lowered, ",\"report\":");
  char *g2 = strndup(start, (size_t)(end - start));
  const char *lowered_path = cli_temp_file("mul_lowered.json", g2);
  char *a = both((const char *const[]){"run", graph, "--inputs", inputs, NULL});
  char *b = both((const char *const[]){"run", lowered_path, "--inputs", inputs, NULL});
  assert_string_equal(a, b);
  assert_non_null(strstr(a, "0.9000000000000001"));
  /* The test can fail: 0.3 gives other bits. */
  const char *other = cli_temp_file("mul03.json", MUL_GRAPH("0.3"));
  char *c = both((const char *const[]){"run", other, "--inputs", inputs, NULL});
  assert_string_not_equal(a, c);
  free(a);
  free(b);
  free(c);
  free(g2);
  free(lowered);
}

/* Integers outside int64 and floats beyond the double range name their place, alike in both. */
static void unrepresentable_literals_are_refused_with_their_place(void **state) {
  (void)state;
  const char *big = cli_temp_file("big.json", MUL_GRAPH("9223372036854775808"));
  const char *huge = cli_temp_file("huge.json", MUL_GRAPH("1e400"));
  for (int mode = 0; mode < 2; mode++) {
    cli_result r = cli_run(mode == 0, NULL, (const char *const[]){"validate", big, NULL});
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "/nodes/1/args/1: integer 9223372036854775808 is outside the "
                                  "int64 range"));
    cli_result_free(&r);
    r = cli_run(mode == 0, NULL, (const char *const[]){"validate", huge, NULL});
    assert_int_equal(r.status, 2);
    assert_non_null(strstr(r.err, "/nodes/1/args/1: 1e400 is beyond the range of a double"));
    cli_result_free(&r);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(validate_prints_every_literal_back_unchanged),
      cmocka_unit_test(lower_changes_no_literal_in_either_mode),
      cmocka_unit_test(run_of_the_lowered_graph_gives_the_same_bits),
      cmocka_unit_test(unrepresentable_literals_are_refused_with_their_place),
  };
  return cli_exit_status(cmocka_run_group_tests(tests, cli_group_setup_daemon, cli_group_teardown));
}
