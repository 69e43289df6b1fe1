/* storage.c - storages, lifetimes and the plan check (see storage.h). */
#include "graph/storage.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/alias.h"
#include "graph/graph_internal.h"
#include "layout/tensor_internal.h"

bool vl__round_up(int64_t n, int64_t alignment, int64_t *out) {
  int64_t r;
  if (__builtin_add_overflow(n, alignment - 1, &r)) return false;
  *out = r & ~(alignment - 1);
  return true;
}

int64_t vl__storage_elem_align(const vl_spec *spec) {
  return (int64_t)vl_dtype_size(spec->dtype);
}

/* Does the storage owned by node i live in the program's constant data (not planned)? */
static bool constant_data(const vl_node *n) {
  if (n->op != VL_NODE_PLACEHOLDER) return false;
  return n->kind == VL_INPUT_PARAMETER || n->kind == VL_INPUT_CONSTANT ||
         (n->kind == VL_INPUT_BUFFER && !n->mutated);
}

vl_status vl__storages_build(const vl_graph *g, int64_t alignment, vl_storages *out) {
  memset(out, 0, sizeof *out);
  uint32_t n = g->n_nodes;
  vl_alias a;
  if (vl__alias_build(&a, g) != VL_OK) return VL_ERR_NOMEM;
  out->of_node = malloc((n ? n : 1) * sizeof *out->of_node);
  out->s = malloc((n ? n : 1) * sizeof *out->s);
  if (out->of_node == NULL || out->s == NULL) {
    vl__alias_free(&a);
    vl__storages_free(out);
    return VL_ERR_NOMEM;
  }
  for (uint32_t i = 0; i < n; i++) {
    out->of_node[i] = VL_NO_NODE;
    const vl_node *node = &g->nodes[i];
    uint32_t c = vl__alias_class(&a, i);
    if (c != i) { /* a view, an in-place result, a second getitem: its owner's storage */
      out->of_node[i] = out->of_node[c];
      continue;
    }
    int64_t nbytes = 0;
    if (!node->has_val || node->op == VL_NODE_OUTPUT || constant_data(node) ||
        !vl_spec_nbytes(node->val, &nbytes) || nbytes == 0) {
      continue;
    }
    vl_storage *s = &out->s[out->n];
    if (!vl__round_up(nbytes, alignment, &s->size)) s->size = INT64_MAX; /* fits no arena */
    uint32_t producer = i;
    vl_node_getitem(node, &producer, NULL); /* a getitem's storage is written by its producer */
    s->owner = i;
    s->align = vl__storage_elem_align(node->val);
    if (s->align < alignment) s->align = alignment;
    s->start = node->op == VL_NODE_PLACEHOLDER ? 0 : producer;
    s->end = i;
    if (a.last_read[c] != VL_NO_NODE && a.last_read[c] > s->end) s->end = a.last_read[c];
    /* A mutated placeholder's final value is the program's: it lives to the output. */
    if (node->op == VL_NODE_PLACEHOLDER && node->mutated) s->end = g->output;
    out->of_node[i] = out->n++;
  }
  vl__alias_free(&a);
  return VL_OK;
}

void vl__storages_free(vl_storages *s) {
  free(s->s);
  free(s->of_node);
  memset(s, 0, sizeof *s);
}

int64_t vl__storages_lower_bound(const vl_storages *s, uint32_t n_positions, uint32_t *peak) {
  /* Sizes starting and ending at each position, summed apart and saturating: the storages
   * ending at p were live at p, so their sum is at most the live total there, which is exact
   * until it saturates, and then the answer is INT64_MAX. */
  int64_t *starts = calloc(2 * ((size_t)n_positions + 1), sizeof *starts);
  if (starts == NULL) return -1;
  int64_t *ends = starts + n_positions + 1, live = 0, best = 0;
  for (uint32_t k = 0; k < s->n; k++) {
    vl__bytes_add(&starts[s->s[k].start], s->s[k].size);
    vl__bytes_add(&ends[s->s[k].end], s->s[k].size);
  }
  if (peak != NULL) *peak = 0;
  for (uint32_t p = 0; p < n_positions && live < INT64_MAX; p++) {
    vl__bytes_add(&live, starts[p]);
    if (live > best && peak != NULL) *peak = p;
    if (live > best) best = live;
    live -= live < INT64_MAX ? ends[p] : 0;
  }
  free(starts);
  return best;
}

/* ---- the check ---------------------------------------------------------------------------- */

/* An ordered set of the storages live at the position swept, by (mem_offset, index): a count
 * tree over their ranks, for the neighbours of an insertion in O(log n). */
typedef struct {
  uint32_t size; /* leaves: a power of two >= n */
  uint32_t *count;
} rank_set;

static void set_update(rank_set *t, uint32_t rank, int delta) {
  for (uint32_t v = rank + t->size; v >= 1; v /= 2)
    t->count[v] = (uint32_t)((int)t->count[v] + delta);
}

/* The largest rank below r in the set, or UINT32_MAX. */
static uint32_t set_before(const rank_set *t, uint32_t r) {
  uint32_t v = r + t->size;
  while (v > 1) {
    if ((v & 1) && t->count[v - 1] > 0) { /* the left sibling holds one: its rightmost */
      v--;
      while (v < t->size) v = t->count[2 * v + 1] > 0 ? 2 * v + 1 : 2 * v;
      return v - t->size;
    }
    v /= 2;
  }
  return UINT32_MAX;
}

static uint32_t set_after(const rank_set *t, uint32_t r) {
  uint32_t v = r + t->size;
  while (v > 1) {
    if (!(v & 1) && t->count[v + 1] > 0) {
      v++;
      while (v < t->size) v = t->count[2 * v] > 0 ? 2 * v : 2 * v + 1;
      return v - t->size;
    }
    v /= 2;
  }
  return UINT32_MAX;
}

typedef struct {
  int64_t offset;
  uint32_t storage;
} offset_key;

static int by_offset(const void *a, const void *b) {
  const offset_key *x = a, *y = b;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  return x->storage < y->storage ? -1 : x->storage > y->storage;
}

static vl_status at_node(vl_error *err, uint32_t i, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static vl_status at_node(vl_error *err, uint32_t i, const char *fmt, ...) {
  char path[48], msg[VL_ERROR_MESSAGE_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(path, sizeof path, "/nodes/%u/mem_offset", i);
  return vl_error_set(err, VL_ERR_INVALID_GRAPH, path, "%s", msg);
}

/* Every storage's offset against the plan's arena and alignment, and which nodes carry one. */
static vl_status check_offsets(const vl_graph *g, const vl_storages *s, vl_error *err) {
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    const vl_node *n = &g->nodes[i];
    bool owner = s->of_node[i] != VL_NO_NODE && s->s[s->of_node[i]].owner == i;
    if (!g->has_plan && n->has_mem_offset) return at_node(err, i, "the graph has no plan");
    if (!owner && n->has_mem_offset) {
      return at_node(err, i,
                     "%.64s is not a planned storage owner (a view, an in-place result, "
                     "constant data or an empty tensor)",
                     n->name);
    }
    if (owner && !n->has_mem_offset) {
      return at_node(err, i, "missing: %.64s owns a planned storage", n->name);
    }
    if (!owner) continue;
    const vl_storage *st = &s->s[s->of_node[i]];
    if (n->mem_offset % g->plan_alignment != 0) {
      return at_node(err, i, "%lld is not a multiple of the plan's alignment %lld",
                     (long long)n->mem_offset, (long long)g->plan_alignment);
    }
    if (n->mem_offset > g->plan_arena_bytes || st->size > g->plan_arena_bytes - n->mem_offset) {
      return at_node(err, i, "[%lld, %lld + %lld) is outside the arena of %lld bytes",
                     (long long)n->mem_offset, (long long)n->mem_offset, (long long)st->size,
                     (long long)g->plan_arena_bytes);
    }
  }
  return VL_OK;
}

/* The storages live at one position must be disjoint: swept by position, each storage that
 * starts is compared with its neighbours by offset among those live (disjoint so far, so the
 * neighbours are the only candidates for an overlap). */
static vl_status check_overlaps(const vl_graph *g, const vl_storages *s, vl_error *err) {
  uint32_t n = s->n, size = 1;
  while (size < n) size *= 2;
  offset_key *keys = malloc((n ? n : 1) * sizeof *keys);
  uint32_t *rank = malloc((n ? n : 1) * sizeof *rank);
  uint32_t *by_start = malloc((n ? n : 1) * sizeof *by_start);
  uint32_t *by_end = malloc((n ? n : 1) * sizeof *by_end);
  uint32_t *starts = calloc((size_t)g->n_nodes + 1, sizeof *starts);
  uint32_t *ends = calloc((size_t)g->n_nodes + 1, sizeof *ends);
  rank_set t = {size, calloc(2 * (size_t)size, sizeof(uint32_t))};
  vl_status st = VL_ERR_NOMEM;
  if (keys && rank && by_start && by_end && starts && ends && t.count) {
    st = VL_OK;
    for (uint32_t k = 0; k < n; k++) keys[k] = (offset_key){g->nodes[s->s[k].owner].mem_offset, k};
    qsort(keys, n, sizeof *keys, by_offset);
    for (uint32_t k = 0; k < n; k++) rank[keys[k].storage] = k;
    /* Storages by start and by end position (counting sorts). */
    for (uint32_t k = 0; k < n; k++) {
      starts[s->s[k].start + 1]++;
      ends[s->s[k].end + 1]++;
    }
    for (uint32_t p = 0; p < g->n_nodes; p++) {
      starts[p + 1] += starts[p];
      ends[p + 1] += ends[p];
    }
    for (uint32_t k = 0; k < n; k++) {
      by_start[starts[s->s[k].start]++] = k;
      by_end[ends[s->s[k].end]++] = k;
    }
    uint32_t si = 0, ei = 0;
    for (uint32_t p = 0; st == VL_OK && p < g->n_nodes; p++) {
      for (; st == VL_OK && si < n && s->s[by_start[si]].start == p; si++) {
        uint32_t k = by_start[si], r = rank[k];
        int64_t lo = keys[r].offset, hi = lo + s->s[k].size;
        uint32_t nb[2] = {set_before(&t, r), set_after(&t, r)};
        for (int j = 0; j < 2 && st == VL_OK; j++) {
          if (nb[j] == UINT32_MAX) continue;
          const vl_storage *o = &s->s[keys[nb[j]].storage];
          int64_t olo = keys[nb[j]].offset, ohi = olo + o->size;
          if (olo < hi && lo < ohi) {
            uint32_t later = o->owner > s->s[k].owner ? o->owner : s->s[k].owner;
            uint32_t other = later == o->owner ? s->s[k].owner : o->owner;
            st = at_node(err, later, "overlaps %.64s while both are live", g->nodes[other].name);
          }
        }
        set_update(&t, r, 1);
      }
      for (; ei < n && s->s[by_end[ei]].end == p; ei++) set_update(&t, rank[by_end[ei]], -1);
    }
  }
  free(keys);
  free(rank);
  free(by_start);
  free(by_end);
  free(starts);
  free(ends);
  free(t.count);
  return st;
}

vl_status vl__plan_check(const vl_graph *g, vl_error *err) {
  bool any = g->has_plan;
  for (uint32_t i = 0; !any && i < g->n_nodes; i++) any = g->nodes[i].has_mem_offset;
  if (!any) return VL_OK;
  vl_storages s;
  vl_status st = vl__storages_build(g, g->has_plan ? g->plan_alignment : 1, &s);
  if (st != VL_OK) return vl_error_set(err, st, "", "out of memory while checking the plan");
  st = check_offsets(g, &s, err);
  if (st == VL_OK) st = check_overlaps(g, &s, err);
  if (st == VL_ERR_NOMEM) vl_error_set(err, st, "", "out of memory while checking the plan");
  vl__storages_free(&s);
  return st;
}
