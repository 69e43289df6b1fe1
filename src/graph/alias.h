/* alias.h - storage classes and writes of a graph, for the lowering's mutation rules (internal).
 *
 * Nodes sharing a buffer form a class: the result of an in-place op (or an out= node) shares
 * its written argument's storage, and a memory.view shares its base's. Output i of a node with
 * several outputs is its operator.getitem node (two getitems of one output share a class), so
 * writes to a getitem, reads of it and its being an output follow that storage. The owner is its
 * earliest node, the tensor whose buffer they share. Writes are recorded per class in graph
 * order; queries come in increasing position, so each class keeps a cursor (amortised O(1)). */
#ifndef VIEWLOWER_ALIAS_H
#define VIEWLOWER_ALIAS_H

#include "viewlower/graph.h"

typedef struct vl_alias {
  uint32_t n;
  uint32_t *parent;      /* union-find over nodes */
  uint32_t *write_start; /* CSR of writer positions per class root: [start[c], start[c+1]) */
  uint32_t *writes;
  uint32_t *cursor;       /* per class root: first write not yet passed */
  uint32_t *last_read;    /* per class root: last node reading any member (VL_NO_NODE: none) */
  uint32_t *first_writer; /* per class root: first writer (VL_NO_NODE: none) */
  bool *is_output;        /* per class root: a member is listed in the output */
} vl_alias;

vl_status vl__alias_build(vl_alias *a, const vl_graph *g);
void vl__alias_free(vl_alias *a);
uint32_t vl__alias_class(vl_alias *a, uint32_t node);
/* First write to class c strictly after position pos (VL_NO_NODE when none). Positions asked
 * for one class must not decrease between calls. */
uint32_t vl__alias_next_write(vl_alias *a, uint32_t c, uint32_t pos);

#endif
