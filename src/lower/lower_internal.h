/* lower_internal.h - what the replace pass learned about one view, for its decision message. */
#ifndef VIEWLOWER_LOWER_INTERNAL_H
#define VIEWLOWER_LOWER_INTERNAL_H

#include "viewlower/lower.h"

typedef struct lower_facts {
  uint32_t view_writer; /* first node writing through the view */
  uint32_t base_writer; /* first node writing the base's storage after the view */
  uint32_t last_read;   /* last node reading the view */
  uint32_t owner;       /* node owning the base's storage */
  uint32_t base;        /* the base judged against (VL_NO_NODE: the node's args[0]) */
  uint32_t layout_base; /* the base of the layout reasons (VL_NO_NODE: base) */
  int64_t offset;       /* replaced: element offset into base's buffer */
  bool legacy;          /* policy legacy: only feeds_output was checked */
} lower_facts;

#define VL__FACTS_NONE                                                                         \
  {VL_NO_NODE, VL_NO_NODE, VL_NO_NODE, VL_NO_NODE, VL_NO_NODE, VL_NO_NODE, 0, false}

/* Fills d for view node v with the given reason bits; messages name the nodes involved. */
vl_status vl__decision_init(vl_decision *d, const vl_graph *g, uint32_t v, uint32_t reasons,
                            const lower_facts *f);
/* Turns kept decision d into "merged": base root (at offset), the message saying so. */
vl_status vl__decision_merged(vl_decision *d, const vl_graph *g, uint32_t root, int64_t offset);
void vl__decision_free(vl_decision *d);

/* Adds nbytes to *sum, saturating at INT64_MAX. */
void vl__bytes_add(int64_t *sum, int64_t nbytes);
/* Removes the nodes marked dead, renumbers every reference and rebuilds the users index. */
vl_status vl__lower_compact(vl_graph *g, const bool *dead);
/* The replace and merge passes of SPEC §3a, with the dead removal that follows them (fold.c). */
vl_status vl__fold(vl_graph *g, vl_report *r);

#endif
