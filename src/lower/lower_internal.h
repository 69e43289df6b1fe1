/* lower_internal.h - what the replace pass learned about one view, for its decision message. */
#ifndef VIEWLOWER_LOWER_INTERNAL_H
#define VIEWLOWER_LOWER_INTERNAL_H

#include "viewlower/lower.h"

typedef struct lower_facts {
  uint32_t view_writer; /* first node writing through the view */
  uint32_t base_writer; /* first node writing the base's storage after the view */
  uint32_t last_read;   /* last node reading the view */
  uint32_t owner;       /* node owning the base's storage */
} lower_facts;

/* Fills d for view node v with the given reason bits; messages name the nodes involved. */
vl_status vl__decision_init(vl_decision *d, const vl_graph *g, uint32_t v, uint32_t reasons,
                            const lower_facts *f);

#endif
