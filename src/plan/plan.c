/* plan.c - the memory planner (docs/format.md §9).
 *
 * Storages and lifetimes come from the graph's storage classes (graph/storage.h). The planner
 * is greedy: storages in some order, each placed in a gap among the already placed storages
 * whose lifetimes overlap its own. Several orders (size, breadth, area, lifetime, start) and
 * fits (best, first, last) are tried and the smallest arena kept; greedy by size with best fit
 * (TFLite's) is among them, so the plan is never larger than it. One more family places the
 * long-lived storages first, each at 0 or as high as it fits below the lower bound: a residual
 * stream whose consecutive tensors overlap (ConvNeXt's blocks) then alternates between the two
 * ends and leaves the middle whole for the wide tensors of each block, which every size-first
 * order misses (1.11x the bound there). A chain (ping-pong) reaches the lower bound, as does
 * every graph of tests/data. Each storage starts at a multiple of its align (the plan's
 * alignment, or its element size when larger), so a plan at alignment 1 still runs.
 *
 * The overlap lists come from one sweep over positions: each storage that starts overlaps
 * exactly the storages live at that moment. Their total is bounded (VL__PLAN_PAIRS per storage
 * plus a constant). A graph past it is planned by first fit in one sweep by start, without the
 * lists (place_sweep): a few long-lived storages beside a long chain pass the bound as surely as
 * very many live at once, and one buffer each made such a plan the naive sum. Only a graph
 * past the sweep's steps too (a hostile one: very many storages live at once) gets one buffer
 * each, which keeps the invariant. Deterministic: the same graph gives the same plan, so
 * planning a planned graph changes nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/storage.h"
#include "layout/tensor_internal.h"
#include "viewlower/plan.h"

#define VL__PLAN_PAIRS 8
#define VL__PLAN_ALL_TRIES 65536
#define VL__PLAN_PAIRS_EXTRA (UINT64_C(1) << 20)
#define VL__PLAN_SWEEP_STEPS (UINT64_C(1) << 26)
#define VL__PLAN_NONE UINT32_MAX

typedef struct {
  const vl_storages *s;
  uint32_t *start; /* CSR of overlapping storages per storage */
  uint32_t *adj;
  int64_t *offset; /* per storage, or -1 while unplaced */
  int64_t cap;     /* the lower bound: where the long-lived storages' upper end is */
  uint32_t passed; /* the first storage a try could place only past the largest arena, or
                    * UINT32_MAX: the one an arena that fits no try is refused at */
} planner;

typedef struct {
  int64_t lo, hi;
} range;

static int by_lo(const void *a, const void *b) {
  const range *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* An order of placement: by primary key (decreasing), then size (decreasing), then earlier
 * start, then earlier owner. */
typedef struct {
  int64_t primary, size;
  uint32_t start, owner, index;
} order_key;

static int by_key(const void *a, const void *b) {
  const order_key *x = a, *y = b;
  if (x->primary != y->primary) return x->primary > y->primary ? -1 : 1;
  if (x->size != y->size) return x->size > y->size ? -1 : 1;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->owner < y->owner ? -1 : x->owner > y->owner;
}

enum {
  ORDER_SIZE,
  ORDER_BREADTH,
  ORDER_BREADTH_TIME,
  ORDER_AREA,
  ORDER_DURATION,
  ORDER_START,
  ORDER_COUNT
};

/* The largest live total over each storage's lifetime (a segment tree of the totals per
 * position): storages live at the peak come first, as in greedy by breadth. */
static bool breadth_of(const vl_storages *s, uint32_t n_positions, int64_t *breadth) {
  uint32_t size = 1;
  while (size < n_positions) size *= 2;
  int64_t *tree = calloc(2 * (size_t)size, sizeof *tree), live = 0;
  int64_t *delta = calloc((size_t)n_positions + 1, sizeof *delta);
  bool ok = tree && delta;
  for (uint32_t k = 0; ok && k < s->n; k++) {
    delta[s->s[k].start] += s->s[k].size;
    delta[s->s[k].end + 1] -= s->s[k].size;
  }
  for (uint32_t q = 0; ok && q < n_positions; q++) tree[size + q] = live += delta[q];
  for (uint32_t v = size - 1; ok && v >= 1; v--) {
    tree[v] = tree[2 * v] > tree[2 * v + 1] ? tree[2 * v] : tree[2 * v + 1];
  }
  for (uint32_t k = 0; ok && k < s->n; k++) {
    int64_t best = 0;
    for (uint32_t lo = s->s[k].start + size, hi = s->s[k].end + size + 1; lo < hi;
         lo /= 2, hi /= 2) {
      if (lo & 1) best = tree[lo] > best ? tree[lo] : best, lo++;
      if (hi & 1) --hi, best = tree[hi] > best ? tree[hi] : best;
    }
    breadth[k] = best;
  }
  free(tree);
  free(delta);
  return ok;
}

static void order_of(const vl_storages *s, int order, const int64_t *breadth, order_key *keys) {
  for (uint32_t k = 0; k < s->n; k++) {
    const vl_storage *x = &s->s[k];
    int64_t primary = x->size, area;
    int64_t second = x->size;
    if (order == ORDER_BREADTH || order == ORDER_BREADTH_TIME) primary = breadth[k];
    if (order == ORDER_BREADTH_TIME) second = -(int64_t)x->start;
    if (order == ORDER_AREA) {
      primary = __builtin_mul_overflow(x->size, (int64_t)(x->end - x->start + 1), &area) ? INT64_MAX
                                                                                         : area;
    }
    if (order == ORDER_DURATION) primary = x->end - x->start;
    if (order == ORDER_START) primary = -(int64_t)x->start;
    keys[k] = (order_key){primary, second, x->start, x->owner, k};
  }
  qsort(keys, s->n, sizeof *keys, by_key);
}

/* Storages by start (order) and by end (by_end), each a counting sort over positions. */
static bool sort_by_position(const vl_storages *s, uint32_t n_positions, uint32_t *order,
                             uint32_t *by_end) {
  uint32_t *count = calloc(2 * ((size_t)n_positions + 1), sizeof *count);
  if (count == NULL) return false;
  uint32_t *ends = count + n_positions + 1;
  for (uint32_t k = 0; k < s->n; k++) {
    count[s->s[k].start + 1]++;
    ends[s->s[k].end + 1]++;
  }
  for (uint32_t q = 0; q < n_positions; q++) {
    count[q + 1] += count[q];
    ends[q + 1] += ends[q];
  }
  for (uint32_t k = 0; k < s->n; k++) {
    order[count[s->s[k].start]++] = k;
    by_end[ends[s->s[k].end]++] = k;
  }
  free(count);
  return true;
}

/* The overlap lists; false when they would pass the bound (or memory runs out). */
static bool build_overlaps(planner *p, uint32_t n_positions) {
  const vl_storages *s = p->s;
  uint32_t n = s->n;
  uint64_t budget = (uint64_t)VL__PLAN_PAIRS * n + VL__PLAN_PAIRS_EXTRA, pairs = 0;
  uint32_t *order = malloc((n ? n : 1) * sizeof *order);
  uint32_t *active = malloc((n ? n : 1) * sizeof *active);
  uint32_t *slot = malloc((n ? n : 1) * sizeof *slot); /* where each live storage sits in active */
  uint32_t *by_end = malloc((n ? n : 1) * sizeof *by_end);
  uint32_t *deg = calloc((size_t)n + 1, sizeof *deg);
  bool ok =
      order && active && slot && by_end && deg && sort_by_position(s, n_positions, order, by_end);
  for (int fill = 0; ok && fill < 2; fill++) {
    /* The sweep: at each position the storages starting there join, then those ending leave. */
    uint32_t n_active = 0, si = 0, ei = 0;
    for (uint32_t q = 0; ok && q < n_positions; q++) {
      for (; si < n && s->s[order[si]].start == q; si++) {
        uint32_t k = order[si];
        if (!fill) {
          pairs += n_active;
          if (pairs > budget) {
            ok = false;
            break;
          }
          deg[k] += n_active;
          for (uint32_t j = 0; j < n_active; j++) deg[active[j]]++;
        } else {
          for (uint32_t j = 0; j < n_active; j++) {
            p->adj[deg[k]++] = active[j];
            p->adj[deg[active[j]]++] = k;
          }
        }
        slot[k] = n_active;
        active[n_active++] = k;
      }
      /* Past the bound the sweep stops here: storages of this position may not have joined
       * the live set, and taking them off it would read their unset slots. */
      for (; ok && ei < n && s->s[by_end[ei]].end == q; ei++) {
        uint32_t k = by_end[ei], at = slot[k];
        active[at] = active[--n_active];
        slot[active[at]] = at;
      }
    }
    if (ok && !fill) {
      /* deg -> CSR starts; the fill pass advances deg[k] from start[k] to start[k + 1]. */
      p->start = malloc(((size_t)n + 1) * sizeof *p->start);
      p->adj = malloc((pairs ? 2 * pairs : 1) * sizeof *p->adj);
      ok = p->start && p->adj;
      uint32_t acc = 0;
      for (uint32_t k = 0; ok && k < n; k++) {
        p->start[k] = acc;
        acc += deg[k];
        deg[k] = p->start[k];
      }
      if (ok) p->start[n] = acc;
    }
  }
  free(order);
  free(active);
  free(slot);
  free(by_end);
  free(deg);
  return ok;
}

/* Places every storage greedily by size (best fit or first fit); returns the arena size, or -1
 * when memory runs out. */
enum { FIT_BEST, FIT_FIRST, FIT_LAST, FIT_COUNT };

/* Offsets of a storage are multiples of its align (a power of two): the plan's alignment, or
 * its element size when larger. Every other storage's end is a multiple of the plan's
 * alignment, so with an alignment of at least 8 these change nothing. */
static int64_t round_up(int64_t n, int64_t align) {
  return (n + align - 1) & ~(align - 1);
}

static int64_t round_down(int64_t n, int64_t align) {
  return n < 0 ? -1 : n & ~(align - 1);
}

static int64_t duration(const vl_storage *x) {
  return (int64_t)x->end - (int64_t)x->start;
}

/* Long-lived first (lifetime at least min_life, longest first), then the rest by size. */
static void order_long_first(const vl_storages *s, int64_t min_life, order_key *keys) {
  for (uint32_t k = 0; k < s->n; k++) {
    const vl_storage *x = &s->s[k];
    int64_t life = duration(x);
    keys[k] = (order_key){life >= min_life ? (INT64_C(1) << 40) + life : 0, x->size, x->start,
                          x->owner, k};
  }
  qsort(keys, s->n, sizeof *keys, by_key);
}

/* Where a long-lived storage goes: at 0 when that is free, else as high as it fits below the
 * lower bound. Storages that overlap in turn, such as the residual of one block and the next,
 * so take the two ends of the arena and leave the middle whole for what lives between them.
 * -1 when nothing fits below the bound. */
static int64_t at_an_end(const range *placed, uint32_t m, int64_t size, int64_t align,
                         int64_t cap) {
  int64_t high = -1, lo = 0;
  if (m == 0 || placed[0].lo >= size) return 0;
  for (uint32_t j = 0; j <= m; j++) { /* each gap, the last one up to the cap */
    int64_t hi = j < m ? placed[j].lo : cap;
    if (hi > cap) hi = cap;
    int64_t at = round_down(hi - size, align);
    if (at >= round_up(lo, align) && at > high) high = at;
    if (j < m && placed[j].hi > lo) lo = placed[j].hi;
  }
  return high;
}

/* Places every storage greedily in keys' order with the given fit, except that storages living
 * at least ends_from positions go at_an_end; returns the arena size, INT64_MAX when a storage
 * would end past the largest arena (VL_PLAN_MAX_BYTES), or -1 when memory runs out. */
static int64_t place_all(planner *p, const order_key *keys, int fit, int64_t ends_from) {
  const vl_storages *s = p->s;
  uint32_t max_deg = 0;
  for (uint32_t k = 0; k < s->n; k++) {
    uint32_t d = p->start[k + 1] - p->start[k];
    if (d > max_deg) max_deg = d;
  }
  range *placed = malloc((max_deg ? max_deg : 1) * sizeof *placed);
  if (placed == NULL) return -1;
  for (uint32_t k = 0; k < s->n; k++) p->offset[k] = -1;
  int64_t arena = 0;
  for (uint32_t i = 0; i < s->n; i++) {
    uint32_t k = keys[i].index, m = 0;
    int64_t size = s->s[k].size, align = s->s[k].align;
    for (uint32_t e = p->start[k]; e < p->start[k + 1]; e++) {
      uint32_t o = p->adj[e];
      if (p->offset[o] >= 0) placed[m++] = (range){p->offset[o], p->offset[o] + s->s[o].size};
    }
    qsort(placed, m, sizeof *placed, by_lo);
    int64_t at = -1, gap_best = INT64_MAX, cursor = 0;
    for (uint32_t j = 0; j < m; j++) {
      int64_t lo = round_up(cursor, align), gap = placed[j].lo - lo;
      if (gap >= size) {
        if (fit == FIT_BEST && gap < gap_best) {
          at = lo;
          gap_best = gap;
        } else if ((fit == FIT_FIRST && at < 0) || fit == FIT_LAST) {
          /* last fit: the highest gap, against its upper neighbour */
          at = fit == FIT_LAST ? round_down(placed[j].lo - size, align) : lo;
        }
      }
      if (placed[j].hi > cursor) cursor = placed[j].hi;
    }
    if (at < 0) at = round_up(cursor, align); /* above everything live beside it */
    if (duration(&s->s[k]) >= ends_from) {
      int64_t end = at_an_end(placed, m, size, align, p->cap);
      if (end >= 0) at = end;
    }
    if (at > VL_PLAN_MAX_BYTES - size) { /* this try passes the largest arena: it loses */
      if (p->passed == UINT32_MAX) p->passed = k;
      arena = INT64_MAX;
      break;
    }
    p->offset[k] = at;
    if (at + size > arena) arena = at + size;
  }
  free(placed);
  return arena;
}

typedef struct {
  uint32_t *next, *prev; /* the live storages as a list by offset */
  uint32_t head;
  uint64_t steps;
} live_list;

/* Places storage k at the lowest gap among the live ones (first fit) and links it there;
 * false when the sweep has taken its steps. */
static bool sweep_place(const vl_storages *s, live_list *l, uint32_t k, int64_t *off) {
  int64_t size = s->s[k].size, align = s->s[k].align, cursor = 0;
  uint32_t after = VL__PLAN_NONE, at = l->head;
  for (; at != VL__PLAN_NONE; after = at, at = l->next[at]) {
    if (++l->steps > VL__PLAN_SWEEP_STEPS) return false;
    if (round_up(cursor, align) + size <= off[at]) break;
    cursor = off[at] + s->s[at].size; /* disjoint and by offset: their ends rise too */
  }
  off[k] = round_up(cursor, align);
  l->prev[k] = after;
  l->next[k] = at;
  if (after != VL__PLAN_NONE) {
    l->next[after] = k;
  } else {
    l->head = k;
  }
  if (at != VL__PLAN_NONE) l->prev[at] = k;
  return true;
}

static void sweep_unlink(live_list *l, uint32_t k) {
  if (l->prev[k] != VL__PLAN_NONE) {
    l->next[l->prev[k]] = l->next[k];
  } else {
    l->head = l->next[k];
  }
  if (l->next[k] != VL__PLAN_NONE) l->prev[l->next[k]] = l->prev[k];
}

/* Past the overlap bound: first fit in one sweep by start. Each storage goes into the lowest
 * gap among the storages live at its start, all placed before it, so of two storages live at
 * one position the later-starting one keeps clear of the other: the invariant holds without
 * the overlap lists. A storage's scan passes only the live storages below its gap, so a few
 * long-lived storages beside a long chain (buffers a program writes, outputs) cost a few steps
 * each. Returns the arena size, INT64_MAX past the largest arena, -1 when memory runs out, -2
 * past VL__PLAN_SWEEP_STEPS (a hostile graph: very many storages live at once). */
static int64_t place_sweep(planner *p, uint32_t n_positions, int64_t *off) {
  const vl_storages *s = p->s;
  size_t n = s->n ? s->n : 1;
  uint32_t *order = malloc(n * sizeof *order), *by_end = malloc(n * sizeof *by_end);
  live_list l = {malloc(n * sizeof *l.next), malloc(n * sizeof *l.prev), VL__PLAN_NONE, 0};
  int64_t arena = -1;
  if (order && by_end && l.next && l.prev && sort_by_position(s, n_positions, order, by_end)) {
    arena = 0;
    bool go = true; /* false once the sweep stops: the storages ending there may be unlinked */
    for (uint32_t q = 0, si = 0, ei = 0; go && q < n_positions; q++) {
      for (; go && si < s->n && s->s[order[si]].start == q; si++) {
        uint32_t k = order[si];
        go = sweep_place(s, &l, k, off);
        if (!go) {
          arena = -2;
        } else if (off[k] > VL_PLAN_MAX_BYTES - s->s[k].size) { /* past the largest arena */
          p->passed = k;
          arena = INT64_MAX;
          go = false;
        } else if (off[k] + s->s[k].size > arena) {
          arena = off[k] + s->s[k].size;
        }
      }
      for (; go && ei < s->n && s->s[by_end[ei]].end == q; ei++) sweep_unlink(&l, by_end[ei]);
    }
  }
  free(order);
  free(by_end);
  free(l.next);
  free(l.prev);
  return arena;
}

static void report_of(const vl_storages *s, uint32_t n_positions, int64_t alignment,
                      vl_plan_report *out) {
  memset(out, 0, sizeof *out);
  out->present = true;
  out->alignment = alignment;
  out->planned = s->n;
  for (uint32_t k = 0; k < s->n; k++) vl__bytes_add(&out->naive_bytes, s->s[k].size);
  out->lower_bound_bytes = vl__storages_lower_bound(s, n_positions, NULL);
}

void vl_plan_drop(vl_graph *g) {
  g->has_plan = false;
  g->plan_arena_bytes = 0;
  g->plan_alignment = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    g->nodes[i].has_mem_offset = false;
    g->nodes[i].mem_offset = 0;
  }
}

/* No plan exists when one buffer, or the buffers live at one position, pass the largest arena:
 * refused at the node (its val, or the position where the live total passes), before any
 * placement, so every later sum stays below 2^63. *cap gets the lower bound. */
static vl_status fits_an_arena(const vl_graph *g, const vl_storages *s, int64_t *cap,
                               vl_error *err) {
  char path[48];
  for (uint32_t k = 0; k < s->n; k++) {
    if (s->s[k].size <= VL_PLAN_MAX_BYTES) continue;
    snprintf(path, sizeof path, "/nodes/%u/val", s->s[k].owner);
    return vl_error_set(err, VL_ERR_TOO_LARGE, path,
                        "%.64s needs a buffer of more than %lld bytes, the largest arena",
                        g->nodes[s->s[k].owner].name, (long long)VL_PLAN_MAX_BYTES);
  }
  uint32_t peak = 0;
  *cap = vl__storages_lower_bound(s, g->n_nodes, &peak);
  if (*cap < 0) return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory while planning");
  if (*cap <= VL_PLAN_MAX_BYTES) return VL_OK;
  snprintf(path, sizeof path, "/nodes/%u", peak);
  return vl_error_set(
      err, VL_ERR_TOO_LARGE, path,
      "the buffers live at node %.64s together need more than %lld bytes, the largest arena",
      g->nodes[peak].name, (long long)VL_PLAN_MAX_BYTES);
}

/* Every try placed some storage past the largest arena although the buffers live at any one
 * node fit it (fragmentation the greedy placements cannot avoid): refused at the node whose
 * buffer the first try could not place, with the bound that did fit. */
static vl_status no_placement(const vl_graph *g, const vl_storages *s, uint32_t k, int64_t cap,
                              vl_error *err) {
  char path[48];
  uint32_t owner = k < s->n ? s->s[k].owner : 0;
  snprintf(path, sizeof path, "/nodes/%u", owner);
  return vl_error_set(err, VL_ERR_TOO_LARGE, path,
                      "no placement found keeps the arena within %lld bytes, the largest arena: "
                      "%.64s's buffer of %lld bytes would end past it (the buffers live at one "
                      "node need %lld bytes together)",
                      (long long)VL_PLAN_MAX_BYTES, g->nodes[owner].name,
                      (long long)(k < s->n ? s->s[k].size : 0), (long long)cap);
}

vl_status vl_plan(vl_graph *g, int64_t alignment, vl_plan_report *out, vl_error *err) {
  if (alignment < 1 || alignment > VL_PLAN_MAX_ALIGNMENT || (alignment & (alignment - 1))) {
    return vl_error_set(err, VL_ERR_INVALID_PARAMS, "/plan_alignment",
                        "must be a power of two from 1 to %d", VL_PLAN_MAX_ALIGNMENT);
  }
  vl_storages s;
  int64_t cap = 0;
  vl_status st = vl__storages_build(g, alignment, &s);
  if (st != VL_OK) return vl_error_set(err, st, "", "out of memory while planning");
  if ((st = fits_an_arena(g, &s, &cap, err)) != VL_OK) {
    vl__storages_free(&s);
    return st;
  }
  planner p = {&s, NULL, NULL, malloc((s.n ? s.n : 1) * sizeof(int64_t)), cap, UINT32_MAX};
  int64_t *best = malloc((s.n ? s.n : 1) * sizeof *best);
  order_key *keys = malloc((s.n ? s.n : 1) * sizeof *keys);
  int64_t *breadth = malloc((s.n ? s.n : 1) * sizeof *breadth);
  int64_t arena = -1;
  bool ready = p.offset && best && keys && breadth;
  st = ready && breadth_of(&s, g->n_nodes, breadth) ? VL_OK : VL_ERR_NOMEM;
  if (st == VL_OK && build_overlaps(&p, g->n_nodes)) {
    /* Every order with every fit; the smallest arena wins (the first on ties). A graph of more
     * than VL__PLAN_ALL_TRIES storages tries greedy by size and by breadth in time order with
     * best fit only, so planning stays a few passes over the storages. */
    bool all = s.n <= VL__PLAN_ALL_TRIES;
    for (int order = 0; order < ORDER_COUNT && st == VL_OK; order++) {
      if (!all && order != ORDER_SIZE && order != ORDER_BREADTH_TIME) continue;
      order_of(&s, order, breadth, keys);
      for (int fit = 0; fit < (all ? FIT_COUNT : 1) && st == VL_OK; fit++) {
        int64_t a = place_all(&p, keys, fit, INT64_MAX);
        if (a < 0) st = VL_ERR_NOMEM;
        if (a >= 0 && (arena < 0 || a < arena)) {
          arena = a;
          memcpy(best, p.offset, s.n * sizeof *best);
        }
      }
    }
    /* Long-lived storages first, at the two ends, for lifetimes from 4 to 64 positions. */
    for (int64_t life = 4; all && life <= 64 && st == VL_OK; life *= 2) {
      order_long_first(&s, life, keys);
      int64_t a = place_all(&p, keys, FIT_BEST, life);
      if (a < 0) st = VL_ERR_NOMEM;
      if (a >= 0 && (arena < 0 || a < arena)) {
        arena = a;
        memcpy(best, p.offset, s.n * sizeof *best);
      }
    }
  } else if (st == VL_OK && (arena = place_sweep(&p, g->n_nodes, best)) == -1) {
    st = VL_ERR_NOMEM;
  } else if (st == VL_OK && arena == -2) {
    /* Past the sweep's steps too: one buffer each, in owner order. */
    arena = 0;
    for (uint32_t k = 0; k < s.n; k++) {
      best[k] = round_up(arena, s.s[k].align);
      if (best[k] > VL_PLAN_MAX_BYTES - s.s[k].size) {
        arena = INT64_MAX; /* refused below */
        p.passed = k;
        break;
      }
      arena = best[k] + s.s[k].size;
    }
  }
  if (st == VL_OK && arena > VL_PLAN_MAX_BYTES) {
    st = no_placement(g, &s, p.passed, cap, err);
  } else if (st == VL_OK) {
    vl_plan_drop(g);
    g->has_plan = true;
    g->plan_alignment = alignment;
    g->plan_arena_bytes = arena;
    for (uint32_t k = 0; k < s.n; k++) {
      g->nodes[s.s[k].owner].has_mem_offset = true;
      g->nodes[s.s[k].owner].mem_offset = best[k];
    }
    report_of(&s, g->n_nodes, alignment, out);
    out->arena_bytes = arena;
  } else {
    vl_error_set(err, st, "", "out of memory while planning");
  }
  free(p.start);
  free(p.adj);
  free(p.offset);
  free(best);
  free(keys);
  free(breadth);
  vl__storages_free(&s);
  return st;
}

vl_status vl_plan_figures(const vl_graph *g, vl_plan_report *out, vl_error *err) {
  memset(out, 0, sizeof *out);
  if (!g->has_plan) return VL_OK;
  vl_storages s;
  vl_status st = vl__storages_build(g, g->plan_alignment, &s);
  if (st != VL_OK) return vl_error_set(err, st, "", "out of memory while reading the plan");
  report_of(&s, g->n_nodes, g->plan_alignment, out);
  out->arena_bytes = g->plan_arena_bytes;
  vl__storages_free(&s);
  return VL_OK;
}
