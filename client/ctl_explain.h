/* ctl_explain.h - the `explain` table of viewlowerctl (ctl_explain.c). */
#ifndef VIEWLOWER_CTL_EXPLAIN_H
#define VIEWLOWER_CTL_EXPLAIN_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>

/* Prints the lower result's report as a table `width` columns wide (at least 40). input_graph
 * (the graph sent, may be NULL) names the nodes removed as dead. When the result lacks a field
 * the table needs, prints nothing, writes that field's JSON pointer (relative to the result) to
 * missing_field[0..n) and returns false. */
bool vl__ctl_print_explain(FILE *out, const cJSON *input_graph, const cJSON *result, int width,
                           char *missing_field, size_t n);

#endif
