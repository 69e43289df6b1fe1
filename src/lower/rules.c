/* rules.c - what every pass of the lowering shares: the conditions of docs/format.md §3 other
 * than layout, judged in one place for the view_copy replace pass, the fold and the parameter
 * layouts' scores, and the compaction that removes dead nodes. Nothing here calls back into the
 * passes. */
#include <stdlib.h>

#include "graph/graph_internal.h"
#include "lower/lower_internal.h"

uint32_t vl__storage_of(const vl_storage_view *v, uint32_t node) {
  return v->storage[vl__alias_class(v->alias, node)];
}

uint32_t vl__storage_reasons(const vl_storage_view *v, const vl_graph *g, uint32_t n, uint32_t base,
                             uint32_t p, lower_facts *f) {
  uint32_t reasons = 0, nc = vl__alias_class(v->alias, n), bs = vl__storage_of(v, base);
  f->base = base;
  f->owner = bs;
  if (v->is_output[n]) reasons |= 1u << VL_REASON_FEEDS_OUTPUT;
  f->view_writer = v->alias->first_writer[nc];
  if (f->view_writer != VL_NO_NODE) reasons |= 1u << VL_REASON_VIEW_MUTATED;
  f->last_read = v->alias->last_read[nc];
  f->base_writer = vl__alias_next_write(v->alias, bs, p);
  if (f->base_writer != VL_NO_NODE && f->last_read != VL_NO_NODE &&
      f->base_writer <= f->last_read) {
    reasons |= 1u << VL_REASON_BASE_MUTATED;
  }
  const vl_node *owner = &g->nodes[bs];
  if (owner->op == VL_NODE_PLACEHOLDER && owner->mutated) {
    reasons |= 1u << VL_REASON_BASE_MUTABLE_INPUT;
  }
  if (v->alias->is_output[bs]) reasons |= 1u << VL_REASON_BASE_FEEDS_OUTPUT;
  if (g->nodes[base].val->dynamic != g->nodes[n].val->dynamic) {
    reasons |= 1u << VL_REASON_DYNAMIC_SHAPE;
  }
  return reasons;
}

vl_status vl__lower_compact(vl_graph *g, const bool *dead) {
  uint32_t *map = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof *map);
  if (map == NULL) return VL_ERR_NOMEM;
  uint32_t kept = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    map[i] = dead[i] ? VL_NO_NODE : kept;
    if (dead[i]) continue; /* what it held stays in the graph's store */
    if (kept != i) g->nodes[kept] = g->nodes[i];
    vl__node_remap_refs(&g->nodes[kept], map);
    kept++;
  }
  g->output = map[g->output];
  g->n_nodes = kept;
  free(map);
  vl__graph_fit(g);
  return vl_graph_index_users(g);
}
