/* ctl_explain.h - `viewlowerctl explain` (ctl_explain.c): a lower result as a table for people,
 * as data (JSON) or as a Graphviz graph of the decisions. */
#ifndef VIEWLOWER_CTL_EXPLAIN_H
#define VIEWLOWER_CTL_EXPLAIN_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>

typedef enum { VL__EXPLAIN_TEXT, VL__EXPLAIN_JSON, VL__EXPLAIN_DOT } vl__explain_format;

/* What --only keeps: every decision, or one kind of them. */
typedef enum {
  VL__EXPLAIN_ALL,
  VL__EXPLAIN_REPLACED,
  VL__EXPLAIN_KEPT,
  VL__EXPLAIN_MERGED,
  VL__EXPLAIN_REMOVED,
  VL__EXPLAIN_RELAID
} vl__explain_only;

typedef struct {
  vl__explain_format format;
  vl__explain_only only;
  int width; /* of the text table, at least 40 */
} vl__explain_opts;

/* "text", "json" or "dot". */
bool vl__ctl_explain_format_from_name(const char *name, vl__explain_format *out);
/* "replaced", "kept", "merged", "removed" or "relaid". */
bool vl__ctl_explain_only_from_name(const char *name, vl__explain_only *out);

/* Prints the lower result's report in opts->format. input_graph (the graph sent, may be NULL)
 * names the nodes removed as dead and gives the dataflow of the picture. When the result lacks
 * a field the output needs, prints nothing, writes that field's JSON pointer (relative to the
 * result) to missing_field[0..n) and returns false. */
bool vl__ctl_print_explain(FILE *out, const cJSON *input_graph, const cJSON *result,
                           const vl__explain_opts *opts, char *missing_field, size_t n);

#endif
