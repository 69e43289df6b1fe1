/* storage.h - the run-time buffers of a graph and their lifetimes (docs/format.md §9), and the
 * check of a memory plan (internal). A storage is one per storage owner: a call_function that owns
 * its buffer, each getitem of a multi-output node (two getitems of one output share it), a
 * placeholder; memory.view nodes and in-place / out= results share their owner's. Planned are
 * the storages of more than zero bytes other than those of parameters, constants and unmutated
 * buffers (the program's constant data). Positions are node indices. */
#ifndef VIEWLOWER_STORAGE_H
#define VIEWLOWER_STORAGE_H

#include "viewlower/graph.h"

typedef struct vl_storage {
  uint32_t owner;      /* the node that carries mem_offset */
  uint32_t start, end; /* first and last position it is live at */
  int64_t size;        /* nbytes of the owner's spec, rounded up to the alignment */
  int64_t align;       /* where the planner may put it: multiples of the plan's alignment, or
                        * of the owner's element size when that is larger (vl__storage_elem_align) */
} vl_storage;

typedef struct vl_storages {
  vl_storage *s; /* planned storages, in order of owner */
  uint32_t n;
  uint32_t *of_node; /* per node: index into s of its storage, or VL_NO_NODE (not planned) */
} vl_storages;

/* The planned storages of g with sizes rounded up to alignment (a power of two >= 1). A size
 * that overflows when rounded is INT64_MAX, which no arena holds: the planner and the check
 * refuse it at its node. */
vl_status vl__storages_build(const vl_graph *g, int64_t alignment, vl_storages *out);
void vl__storages_free(vl_storages *s);
/* The multiple a planned storage's mem_offset must be for its owner (whose val is spec) to be
 * read as its dtype: the element size (a float64 cannot start at an odd byte). The planner
 * keeps it beside the plan's alignment; execution refuses an offset that breaks it. */
int64_t vl__storage_elem_align(const vl_spec *spec);
/* n rounded up to a multiple of alignment; false on overflow. */
bool vl__round_up(int64_t n, int64_t alignment, int64_t *out);
/* The largest sum of sizes of storages live at one position (no valid plan is smaller),
 * saturating at INT64_MAX (sizes are below 2^63 each, their sum need not be); *peak (may be
 * NULL) gets the first position where it is reached. -1 when memory runs out. */
int64_t vl__storages_lower_bound(const vl_storages *s, uint32_t n_positions, uint32_t *peak);
/* The plan check (docs/format.md §9, "Checking") of a graph that has a plan (and of one that has
 * none: no mem_offset): every planned owner has a mem_offset and no other node has one; each is a
 * multiple of the alignment and its range lies inside the arena; no two storages live at one
 * position overlap (the later owner of the first overlapping pair is named). O(n log n). */
vl_status vl__plan_check(const vl_graph *g, vl_error *err);

#endif
