/* alias.c - storage classes, writers and readers per class (see alias.h). */
#include "graph/alias.h"

#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"

uint32_t vl__alias_class(vl_alias *a, uint32_t node) {
  uint32_t r = node;
  while (a->parent[r] != r) r = a->parent[r];
  while (a->parent[node] != r) { /* path compression */
    uint32_t next = a->parent[node];
    a->parent[node] = r;
    node = next;
  }
  return r;
}

static void join(vl_alias *a, uint32_t x, uint32_t y) {
  uint32_t rx = vl__alias_class(a, x), ry = vl__alias_class(a, y);
  /* The smaller index stays root, so a class root is its owner (earliest node). */
  if (rx < ry) {
    a->parent[ry] = rx;
  } else if (ry < rx) {
    a->parent[rx] = ry;
  }
}

/* Records the writes of node w, counting (fill false) or filling (fill true) the CSR. */
typedef struct {
  vl_alias *a;
  uint32_t w;
  bool fill;
} write_ctx;

static void record_write(void *p, uint32_t ref) {
  write_ctx *c = p;
  uint32_t cls = vl__alias_class(c->a, ref);
  if (c->a->first_writer[cls] == VL_NO_NODE) c->a->first_writer[cls] = c->w;
  if (c->fill) {
    c->a->writes[c->a->cursor[cls]++] = c->w;
  } else {
    c->a->write_start[cls + 1]++;
  }
}

static void visit_writes(const vl_graph *g, write_ctx *c) {
  vl__node_for_each_write(&g->nodes[c->w], record_write, c);
}

/* The argument whose storage n's result shares: out= target, else an in-place op's arg 0. */
static bool inplace_result(const vl_node *n, uint32_t *arg) {
  if (n->out != VL_NO_NODE) {
    *arg = n->out;
    return true;
  }
  if (vl__node_is_inplace(n)) {
    *arg = n->args[0].u.ref;
    return true;
  }
  return false;
}

/* Output i of a multi-output node is its getitem node (docs/format.md §2): each getitem owns that
 * storage, and a second getitem of the same output joins the first one's class. */
static vl_status join_getitems(vl_alias *a, const vl_graph *g) {
  uint32_t *base = malloc((g->n_nodes ? g->n_nodes : 1) * sizeof *base);
  size_t total = 0;
  if (base == NULL) return VL_ERR_NOMEM;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    base[i] = (uint32_t)total;
    total += g->nodes[i].n_vals;
  }
  uint32_t *first = malloc((total ? total : 1) * sizeof *first);
  if (first == NULL) {
    free(base);
    return VL_ERR_NOMEM;
  }
  for (size_t k = 0; k < total; k++) first[k] = VL_NO_NODE;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    uint32_t producer, index;
    if (!vl_node_getitem(&g->nodes[i], &producer, &index) || index >= g->nodes[producer].n_vals) {
      continue;
    }
    uint32_t *slot = &first[base[producer] + index];
    if (*slot == VL_NO_NODE) {
      *slot = i;
    } else {
      join(a, i, *slot);
    }
  }
  free(first);
  free(base);
  return VL_OK;
}

static void build_classes(vl_alias *a, const vl_graph *g) {
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const vl_node *n = &g->nodes[i];
    uint32_t arg;
    if (inplace_result(n, &arg)) {
      join(a, i, arg);
    } else if (vl__is_memory_view(n) && n->n_args > 0 && n->args[0].kind == VL_ARG_REF) {
      join(a, i, n->args[0].u.ref);
    }
  }
}

static void build_reads(vl_alias *a, const vl_graph *g) {
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const vl_node *n = &g->nodes[i];
    uint32_t c = vl__alias_class(a, i);
    for (uint32_t k = 0; k < n->n_users; k++) {
      if (a->last_read[c] == VL_NO_NODE || n->users[k] > a->last_read[c]) {
        a->last_read[c] = n->users[k];
      }
    }
  }
  const vl_node *out = &g->nodes[g->output];
  for (uint32_t k = 0; k < out->n_args; k++) {
    if (out->args[k].kind == VL_ARG_REF) {
      a->is_output[vl__alias_class(a, out->args[k].u.ref)] = true;
    }
  }
}

vl_status vl__alias_build(vl_alias *a, const vl_graph *g) {
  memset(a, 0, sizeof *a);
  uint32_t n = a->n = g->n_nodes;
  /* The per-node arrays in one zeroed block (one allocation a large graph gets from and gives
   * back to the system whole): parent, write_start (n + 1), cursor, last_read, first_writer,
   * then is_output. */
  uint32_t *b = calloc((size_t)n * 5 + 1 + ((size_t)n + 3) / 4, sizeof(uint32_t));
  if (b == NULL) return VL_ERR_NOMEM;
  a->parent = b;
  a->write_start = b + n;
  a->cursor = b + 2 * (size_t)n + 1;
  a->last_read = b + 3 * (size_t)n + 1;
  a->first_writer = b + 4 * (size_t)n + 1;
  a->is_output = (bool *)(void *)(b + 5 * (size_t)n + 1);
  for (uint32_t i = 0; i < n; i++) {
    a->parent[i] = i;
    a->last_read[i] = a->first_writer[i] = VL_NO_NODE;
  }
  build_classes(a, g);
  if (join_getitems(a, g) != VL_OK) {
    vl__alias_free(a);
    return VL_ERR_NOMEM;
  }
  write_ctx c = {a, 0, false};
  for (c.w = 0; c.w < n; c.w++) visit_writes(g, &c);
  for (uint32_t i = 0; i < n; i++) a->write_start[i + 1] += a->write_start[i];
  a->writes = malloc((a->write_start[n] ? a->write_start[n] : 1) * sizeof *a->writes);
  if (a->writes == NULL) {
    vl__alias_free(a);
    return VL_ERR_NOMEM;
  }
  memcpy(a->cursor, a->write_start, n * sizeof *a->cursor);
  c.fill = true;
  for (c.w = 0; c.w < n; c.w++) visit_writes(g, &c);
  memcpy(a->cursor, a->write_start, n * sizeof *a->cursor);
  build_reads(a, g);
  return VL_OK;
}

uint32_t vl__alias_next_write(vl_alias *a, uint32_t c, uint32_t pos) {
  uint32_t end = a->write_start[c + 1];
  while (a->cursor[c] < end && a->writes[a->cursor[c]] <= pos) a->cursor[c]++;
  return a->cursor[c] < end ? a->writes[a->cursor[c]] : VL_NO_NODE;
}

void vl__alias_free(vl_alias *a) {
  free(a->parent); /* the block of the per-node arrays */
  free(a->writes);
  memset(a, 0, sizeof *a);
}
