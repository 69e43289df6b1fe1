/* graph_internal.h - graph helpers shared by the parser, the passes and the interpreter. */
#ifndef VIEWLOWER_GRAPH_INTERNAL_H
#define VIEWLOWER_GRAPH_INTERNAL_H

#include "graph/store.h"
#include "viewlower/graph.h"

/* Calls fn(ctx, ref) for every node reference of n: args at any depth, kwargs.out, mutates
 * (in that order; a node referenced twice is visited twice). */
typedef void (*vl__ref_fn)(void *ctx, uint32_t ref);
void vl__node_for_each_ref(const vl_node *n, vl__ref_fn fn, void *ctx);
/* Calls fn(ctx, ref) for every argument n writes: an in-place op's arg 0, kwargs.out, mutates. */
void vl__node_for_each_write(const vl_node *n, vl__ref_fn fn, void *ctx);
/* Does n write any argument (vl__node_for_each_write has something to call back)? A node that
 * writes is never removed as dead: its write is read through the written storage. */
bool vl__node_writes(const vl_node *n);
/* Rewrites every reference of n through map (old index -> new index). */
void vl__node_remap_refs(vl_node *n, const uint32_t *map);
/* src into dst, its lists and strings copied into store s (references kept). */
vl_status vl__arg_copy(vl__store *s, const vl_arg *src, vl_arg *dst);
/* An empty graph with its store (output VL_NO_NODE); NULL when out of memory. */
vl_graph *vl__graph_new(void);
/* Gives the node array's room past n_nodes back (after parsing, after removing nodes). */
void vl__graph_fit(vl_graph *g);

/* Target tests. */
#define VL__GETITEM "operator.getitem"

bool vl__target_is(const vl_node *n, const char *target);
bool vl__is_view_copy(const vl_node *n);   /* aten.view_copy.default */
bool vl__is_memory_view(const vl_node *n); /* memory.view */
/* Is n in-place by naming convention (operator name ends in one "_"), writing arg 0? */
bool vl__node_is_inplace(const vl_node *n);

/* Semantic validation after parsing (graph_check.c): the skip_dim_order spelling rule and view
 * nodes whose size argument, val and base agree. */
vl_status vl__graph_check(vl_graph *g, vl_error *err);

/* The first check vl_graph_from_json makes of a tree, before any node is read, made over a
 * text by the streaming reader's check (no tape, no tree): VL_ERR_TOO_LARGE at "/nodes" with
 * the tree's message when the text's "nodes" array (the first member of that name of the root
 * object, as a tree's lookup finds it) has more entries than lim->max_nodes, else VL_OK (also
 * for a text that is no object, or whose JSON breaks before the count passes the limit). */
vl_status vl__graph_text_bounds(const char *json, size_t len, const vl_limits *lim,
                                vl_error *err);

#endif
