/* ctl_help.c - `viewlowerctl COMMAND --help`: one row per command (what it does, its
 * arguments, its flags, what it prints). A command of viewlowerctl's table without a row here
 * is caught by tests/cli (every command answers --help with exit 0). */
#include "ctl_help.h"

#include <string.h>

static const struct {
  const char *name;
  const char *text;
} rows[] = {
    {"validate",
     "usage: viewlowerctl validate GRAPH\n"
     "Parses and checks a graph (format.md section 2) and prints it as the library prints it: every\n"
     "val with dtype, shape, dim_order, and dynamic when true. GRAPH may be - (stdin).\n"},
    {"lower",
     "usage: viewlowerctl lower GRAPH... [-o OUT] [--keep-view-copy] [--no-fold]\n"
     "                          [--no-param-layouts] [--plan [--plan-alignment N]]\n"
     "                          [--policy safe|legacy]\n"
     "Lowers each graph and prints {\"graph\": lowered, \"report\": report}.\n"
     "  -o OUT             one GRAPH: write the result to the file OUT (- is stdout);\n"
     "                     several: OUT is a directory, each result is OUT/<input file name>;\n"
     "                     two inputs with the same file name are refused (exit 64), and the\n"
     "                     file of an input that fails is removed, so no stale result stays\n"
     "  --keep-view-copy   remove_view_copy false: change nothing, report every copy kept\n"
     "  --no-fold          fold false: consider view_copy alone, not chains of layout-only\n"
     "                     copies (format.md section 3)\n"
     "  --no-param-layouts param_layouts false: keep every parameter in its declared layout\n"
     "                     (by default a weight is stored in the order its readers want)\n"
     "  --plan             plan the arena: every run-time buffer gets a mem_offset\n"
     "  --plan-alignment N the plan's alignment in bytes (a power of two, default 16)\n"
     "  --policy P         safe (default) or legacy (upstream's rule, for comparison only)\n"
     "Several graphs without -o: one line per input, in input order; an input that fails\n"
     "gives {\"error\": {\"input\", \"code\", \"kind\", \"path\", \"message\"}} on its line (and\n"
     "its error line on stderr). Several graphs go to the daemon concurrently; progress is\n"
     "shown when stderr is a terminal. The exit code is the worst of the inputs'.\n"},
    {"explain",
     "usage: viewlowerctl explain GRAPH [--keep-view-copy] [--no-fold] [--no-param-layouts]\n"
     "                            [--plan [--plan-alignment N]] [--policy safe|legacy]\n"
     "                            [--format text|json|dot]\n"
     "                            [--only replaced|kept|merged|removed|relaid]\n"
     "Lowers GRAPH and prints its decisions.\n"
     "  --format text  (default) a table for people: node, base, decision, reasons, then the\n"
     "                 message on its own lines; the relaid parameters; the totals; the\n"
     "                 memory plan when the report has one; the nodes removed as dead. It fits\n"
     "                 the terminal's width (80 columns when stdout is not a terminal, or\n"
     "                 $COLUMNS when set)\n"
     "  --format json  one JSON object {\"graph\", \"nodes\", \"edges\", \"report\"}: every node\n"
     "                 of GRAPH with its decision and bytes, data, alias and strided-read\n"
     "                 edges (format.md section 7)\n"
     "  --format dot   the same as a Graphviz graph, nodes coloured by decision: render it\n"
     "                 with dot -Tsvg (Debian package graphviz)\n"
     "  --only D       only the decisions D (replaced, kept, merged, removed or relaid); json\n"
     "                 and dot keep their neighbours as context, text drops the totals\n"
     "Lower flags as for lower.\n"},
    {"verify",
     "usage: viewlowerctl verify GRAPH [--inputs FILE] [--seed N] [--keep-view-copy]\n"
     "                           [--no-fold] [--no-param-layouts] [--plan [--plan-alignment N]]\n"
     "                           [--policy safe|legacy]\n"
     "Lowers GRAPH, runs the original and the lowered graph on the same inputs and compares\n"
     "every output bit for bit. Prints {\"equal\", \"report\", \"mismatches\"}; exit 1 when\n"
     "they differ.\n"
     "  --inputs FILE      a JSON object: placeholder name -> tensor (format.md section 4)\n"
     "  --seed N           generate the inputs not given from seed N (0 to 2^53)\n"
     "Lower flags as for lower.\n"},
    {"run", "usage: viewlowerctl run GRAPH --inputs FILE [-o OUT] [--encoding values|base64]\n"
            "Executes GRAPH with the interpreter and prints {\"outputs\": [tensor, ...]}.\n"
            "  --inputs FILE      a JSON object: placeholder name -> tensor (required)\n"
            "  -o OUT             write to the file OUT instead of stdout\n"
            "  --encoding E       values (default; logical order) or base64 (raw bytes, physical "
            "order)\n"},
    {"view-copy",
     "usage: viewlowerctl view-copy TENSOR --size 1,2,-1 [--out-dim-order 0,1,2] [-o OUT]\n"
     "                              [--encoding values|base64]\n"
     "Runs the view_copy kernel on TENSOR and prints the output tensor.\n"
     "  --size LIST          the output's sizes, a comma list; at most one -1; '' is rank 0\n"
     "  --out-dim-order LIST the output's dim order (default: contiguous)\n"
     "  -o OUT               write to the file OUT instead of stdout\n"
     "  --encoding E         values (default) or base64\n"},
    {"ping", "usage: viewlowerctl ping\n"
             "Asks the daemon for {\"pong\":true}: exit 0 when it answers, 3 when it cannot be\n"
             "reached. A health check.\n"},
    {"stats", "usage: viewlowerctl stats [--format json|openmetrics|prometheus]\n"
              "Prints the daemon's counters (not with --local).\n"
              "  --format json         the stats result as JSON (default)\n"
              "  --format openmetrics  OpenMetrics 1.0 text (ends with # EOF)\n"
              "  --format prometheus   Prometheus text format 0.0.4, for node_exporter's textfile\n"
              "                        collector\n"
              "The metric names are listed in viewlowerctl(1) and docs/deployment.md.\n"},
    {"worker",
     "usage: viewlowerctl worker --persistent_worker | @ARGSFILE | --flagfile=ARGSFILE\n"
     "Bazel's JSON persistent worker: reads WorkRequests on stdin and answers each with one\n"
     "WorkResponse line; each request's arguments are a viewlowerctl command line run in\n"
     "process (--local), optionally led by --graph-out FILE / --report-out FILE, which split a\n"
     "one-graph lower result into the graph and the report. @ARGSFILE runs one request whose\n"
     "arguments are the file's lines. See docs/build-systems.md.\n"},
    {"version",
     "usage: viewlowerctl version\n"
     "Prints the daemon's (or, with --local, the library's) {\"version\", \"protocol\"}.\n"
     "viewlowerctl --version prints this program's own version.\n"},
};

bool vl__ctl_help(FILE *out, const char *command) {
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    if (strcmp(rows[i].name, command) == 0) {
      fputs(rows[i].text, out);
      fputs("Global flags (before COMMAND): --socket PATH | --local, --timeout-ms N.\n", out);
      return true;
    }
  }
  return false;
}
