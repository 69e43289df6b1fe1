/* lower_internal.h - what the passes share (internal): the facts behind one decision, for its
 * message; the conditions of docs/format.md §3 ("Reasons") other than layout, judged once for every
 * pass (rules.c); compaction; and the passes lower.c runs in order. Files of this folder call
 * downwards only: lower.c -> params.c, fold.c -> rules.c, lower_report.c. */
#ifndef VIEWLOWER_LOWER_INTERNAL_H
#define VIEWLOWER_LOWER_INTERNAL_H

#include "graph/alias.h"
#include "layout/tensor_internal.h"
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
void vl__param_kept_free(vl_param_kept *e);

/* Removes the nodes marked dead, renumbers every reference and rebuilds the users index. */
vl_status vl__lower_compact(vl_graph *g, const bool *dead);

/* Storage classes as a pass sees them while it decides in graph order: alias classes of the
 * input graph, each class's buffer after the replacements made so far (storage, per class
 * root), and which nodes the output lists. */
typedef struct vl_storage_view {
  vl_alias *alias;
  const uint32_t *storage;
  const bool *is_output;
} vl_storage_view;

uint32_t vl__storage_of(const vl_storage_view *v, uint32_t node);
/* The conditions other than layout for node n read at position p with base as its
 * base (feeds_output, view_mutated, base_mutated, base_mutable_input, base_feeds_output,
 * dynamic_shape), as reason bits; f gets the nodes involved. Positions asked must not decrease
 * per storage class (vl__alias_next_write). */
uint32_t vl__storage_reasons(const vl_storage_view *v, const vl_graph *g, uint32_t n,
                             uint32_t base, uint32_t p, lower_facts *f);

/* What became of each node in the fold (per index of the graph given to vl__fold). */
enum { VL_FATE_OTHER, VL_FATE_ALIASED, VL_FATE_COPIES, VL_FATE_DEAD };

/* The replace and merge passes of the layout algebra, with the dead removal that follows them
 * (fold.c). fate, when not NULL, gets a VL_FATE_* per node: ALIASED for a node replaced (dead or
 * not), COPIES for one kept or merged, DEAD for one removed that was not replaced. */
vl_status vl__fold(vl_graph *g, vl_report *r, uint8_t *fate);

/* Stored layouts of parameters (params.c): picks each eligible parameter's stored order and
 * rewrites its val; fills r's param keys. Runs between the first dead removal and vl__fold. */
typedef struct vl_params vl_params;
vl_status vl__params_relay(vl_graph *g, vl_report *r, vl_params **state);
/* After vl__fold (fate from it): each relaid parameter's aliased users, and which ineligible
 * ones are reported; frees state. */
vl_status vl__params_finish(vl_params *state, vl_report *r, const uint8_t *fate);
void vl__params_free(vl_params *state);

#endif
