/* fold_ops.h - the layout-only ops (internal; docs/format.md §3): which nodes are layout-only, the
 * input each reads, and each op's logical map as a descriptor map (viewlower/layout.h). One
 * table row per target; the lowering folds with it and the interpreter executes with it. */
#ifndef VIEWLOWER_FOLD_OPS_H
#define VIEWLOWER_FOLD_OPS_H

#include "viewlower/graph.h"
#include "viewlower/layout.h"

typedef enum {
  VL_FOLD_NONE,       /* not layout-only */
  VL_FOLD_VIEW_COPY,  /* aten.view_copy.default */
  VL_FOLD_OP,         /* any other row of the table */
  VL_FOLD_AS_STRIDED, /* aten.as_strided_copy.default: reads its input's buffer */
  VL_FOLD_GETITEM     /* operator.getitem of a split / unbind */
} vl_fold_kind;

/* The kind of node i, and (when layout-only) the node whose elements it reads: args[0], or for
 * a split's getitem its producer's input. Layout-only needs a call with a val, an input with a
 * val of the same dtype, and no writes of its own (no kwargs.out, no mutates) except for a
 * view_copy, which is always decided but never folded when it writes. */
vl_fold_kind vl__fold_kind(const vl_graph *g, uint32_t i, uint32_t *input);
/* Does n's target only permute dims and insert or drop size-1 dims (permute, transpose, t,
 * squeeze, unsqueeze, alias, the layout conversions)? Those propose a parameter's stored order. */
bool vl__fold_proposes_order(const vl_node *n);
/* Is node i a split / unbind producer (aten.split_copy.Tensor, split_with_sizes_copy, unbind)? */
bool vl__fold_is_split(const vl_node *n);
/* Node i's map applied to in (the descriptor of its input's elements): false when the map fails
 * (no strided alias, a bad argument) or gives another shape than node i's val. For a getitem,
 * split_starts are its producer's (vl__fold_split_starts; NULL fails). */
bool vl__fold_map(const vl_graph *g, uint32_t i, const int64_t *split_starts, const vl_desc *in,
                  vl_desc *out);
/* Why node i's map (not a getitem's) gives no view of an input of spec input's shape: the
 * first problem with its arguments that PyTorch would raise, or the shape they give against
 * its val's. Writes a message and the JSON pointer, relative to the node, of the argument (or
 * "/val/shape") at fault, and returns true; false when the arguments apply and give val's shape
 * (then only the input's layout stands in the way) or i is no row of the table. */
bool vl__fold_why(const vl_graph *g, uint32_t i, const vl_spec *input, char *path, size_t path_cap,
                  char *msg, size_t msg_cap);
/* Where each output of split producer n starts along its dim: starts[0..n_vals], output k
 * ending where k + 1 starts (computed once per producer, so a split is linear in its outputs).
 * False on bad arguments (a split_sizes list of another length than vals included). */
bool vl__fold_split_starts(const vl_node *n, int64_t *starts);
/* Output index of split producer n, given its starts, over input descriptor in. */
bool vl__fold_split_output(const vl_node *n, uint32_t index, const int64_t *starts,
                           const vl_desc *in, vl_desc *out);
/* An integer literal (a float token of 2^63 or more - INT64_MAX read through a double - is
 * INT64_MAX, and of -2^63 or less INT64_MIN); false for anything else. */
bool vl__fold_int(const vl_arg *a, int64_t *v);

#endif
