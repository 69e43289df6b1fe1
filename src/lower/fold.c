/* fold.c - the layout algebra (docs/format.md §3): replace and merge over every layout-only op,
 * then dead removal. Linear in nodes + edges.
 *
 * Every node has a descriptor desc(n) = (R, o, s): element i of n is element o + sum i_d*s_d of
 * R's buffer. It is n's own buffer (n, 0, its strides) unless n is a memory.view (its alias), or
 * a layout-only copy whose candidate 1 exists (its map applied to its input's descriptor).
 * Nodes are decided in graph order (a split's getitems at their producer's place): a node
 * becomes memory.view of the first candidate's R that passes the layout test and every
 * mutation rule with R as the base, else stays a copy with its reasons (docs/format.md §3).
 *
 * Candidate 1 through a copy b whose descriptor points elsewhere is only sound while b still
 * holds what its chain read from R: b not written since, and R not written since the chain's
 * first copy (snap[b], the normalization rule). A sweep keeps the last write per storage class.
 *
 * The merge sweep then rewrites a kept node whose input is a kept (or merged) copy read by
 * nothing else into one aten.as_strided_copy of R; each merge and each dead node may enable
 * another, so a worklist runs to the fixpoint instead of repeated sweeps. Dead nodes are only
 * marked (users counted down) and compacted once at the end. */
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "lower/fold_ops.h"
#include "lower/lower_internal.h"

enum { ST_OTHER, ST_KEPT, ST_REPLACED, ST_MERGED };

typedef struct folder {
  vl_graph *g;
  vl_report *r;
  vl_alias alias;
  uint32_t *storage;    /* per class root: the class whose buffer it uses after replacements */
  uint32_t *last_write; /* per class root: latest writer before the position being decided */
  bool *is_output;      /* per node: listed in the output */
  uint8_t *kind;        /* per node: vl_fold_kind of the input graph */
  uint32_t *input;      /* per layout-only node: the node whose elements it reads */
  uint8_t *state;       /* per node: ST_* */
  bool *own;            /* per node: desc is (n, 0, own strides) */
  bool *has_c1;         /* per kept node: candidate 1 exists (and is its descriptor) */
  uint32_t *root;       /* per node with !own: R */
  int64_t *offset;      /* per node with !own: o */
  uint32_t *snap;       /* per kept node with a chain: position of the chain's first copy */
  int64_t *strides;     /* pool: VL_MAX_RANK entries per node that may need them */
  size_t *stride_at;    /* per node: start in the pool, or SIZE_MAX */
  uint32_t *decision;   /* per node: index into r->decisions, or VL_NO_NODE */
  /* merge and dead removal */
  uint32_t *users_left;
  uint32_t *seen;
  bool *dead;
  uint32_t *stack; /* nodes to kill */
  uint32_t n_stack;
  uint32_t *queue; /* nodes whose users dropped to one (at most 2n: n, plus one per merge) */
  uint32_t n_queue;
  uint32_t pos; /* the position being swept */
  int64_t *split_starts; /* of the split whose getitems are being decided, or NULL */
  void *block;           /* the per-node arrays above, in one allocation (folder_init) */
} folder;

typedef struct cand {
  uint32_t root;
  vl_desc d;
} cand;

/* ---- descriptors ---------------------------------------------------------------------------- */

static void desc_get(const folder *x, uint32_t i, vl_desc *d, uint32_t *root) {
  const vl_spec *s = x->g->nodes[i].val;
  if (x->own[i]) {
    vl_desc_of_spec(s, 0, d);
    *root = i;
    return;
  }
  d->rank = s->rank;
  d->offset = x->offset[i];
  memcpy(d->shape, s->shape, s->rank * sizeof s->shape[0]);
  memcpy(d->strides, &x->strides[x->stride_at[i]], s->rank * sizeof d->strides[0]);
  *root = x->root[i];
}

static void desc_set(folder *x, uint32_t i, uint32_t root, const vl_desc *d) {
  x->own[i] = false;
  x->root[i] = root;
  x->offset[i] = d->offset;
  memcpy(&x->strides[x->stride_at[i]], d->strides, d->rank * sizeof d->strides[0]);
}

/* The buffer a memory.view's args[0] names, and where in it that node's elements start. */
static void buffer_of(const folder *x, uint32_t b, uint32_t *root, int64_t *offset) {
  if (vl__is_memory_view(&x->g->nodes[b]) && !x->own[b]) {
    *root = x->root[b];
    *offset = x->offset[b];
  } else {
    *root = b;
    *offset = 0;
  }
}

/* A memory.view's descriptor: the buffer it aliases, from its offset on, read through its own
 * declared layout. */
static void desc_of_alias(folder *x, uint32_t i, uint32_t base, int64_t offset) {
  uint32_t root;
  int64_t o;
  vl_desc d;
  buffer_of(x, base, &root, &o);
  vl_desc_of_spec(x->g->nodes[i].val, o + offset, &d);
  desc_set(x, i, root, &d);
  x->snap[i] = VL_NO_NODE;
}

/* ---- conditions ------------------------------------------------------------------------------ */

static uint32_t storage_of(folder *x, uint32_t node) {
  vl_storage_view sv = {&x->alias, x->storage, x->is_output};
  return vl__storage_of(&sv, node);
}

/* The conditions other than layout, for node n read at position p with root as base. */
static uint32_t other_conditions(folder *x, uint32_t n, uint32_t root, uint32_t p,
                                 lower_facts *f) {
  vl_storage_view sv = {&x->alias, x->storage, x->is_output};
  return vl__storage_reasons(&sv, x->g, n, root, p, f);
}

/* The layout reason when no candidate passes the layout test: base_layout / view_layout for a
 * view_copy, judged against its input b; reorders for every other op. */
static uint32_t layout_reason(folder *x, uint32_t n, uint32_t b) {
  uint32_t reasons = 0;
  if (x->kind[n] == VL_FOLD_VIEW_COPY) {
    if (!vl_layout_rule_contiguous(x->g->nodes[b].val)) reasons |= 1u << VL_REASON_BASE_LAYOUT;
    if (!vl_layout_rule_contiguous(x->g->nodes[n].val)) reasons |= 1u << VL_REASON_VIEW_LAYOUT;
  }
  return reasons ? reasons : 1u << VL_REASON_REORDERS;
}

/* May n read b's descriptor instead of b (candidate 1)? Always when b aliases or is its own
 * buffer; through a copy b with a chain, only while b and the chain's root are unwritten. */
static bool chain_intact(folder *x, uint32_t b, uint32_t root) {
  if (x->own[b] || vl__is_memory_view(&x->g->nodes[b])) return true;
  uint32_t wb = x->last_write[vl__alias_class(&x->alias, b)];
  uint32_t wr = x->last_write[vl__alias_class(&x->alias, root)];
  return wb == VL_NO_NODE && (wr == VL_NO_NODE || wr < x->snap[b]);
}

/* ---- rewriting ------------------------------------------------------------------------------- */

static vl_arg int_arg(int64_t v) {
  vl_arg a = {.kind = VL_ARG_INT};
  a.u.i = v;
  return a;
}

/* A list of n integers, in the graph's store. */
static vl_status int_list_arg(vl_graph *g, const int64_t *v, uint8_t n, vl_arg *out) {
  out->kind = VL_ARG_LIST;
  out->count = n;
  out->u.items = NULL;
  if (n == 0) return VL_OK;
  out->u.items = vl__store_alloc(g->store, n * sizeof(vl_arg));
  if (out->u.items == NULL) return VL_ERR_NOMEM;
  for (uint8_t k = 0; k < n; k++) out->u.items[k] = int_arg(v[k]);
  return VL_OK;
}

/* Node i becomes target(args[0..n)) with no kwargs (args' lists already in the graph's store;
 * the old arrays stay in the store until the graph is freed). */
static vl_status rewrite(vl_graph *g, vl_node *node, const char *target, const vl_arg *args,
                         uint32_t n) {
  const char *t = vl__store_intern(g->store, target, strlen(target));
  vl_arg *a = vl__store_alloc(g->store, n * sizeof *a);
  if (t == NULL || a == NULL) return VL_ERR_NOMEM;
  memcpy(a, args, n * sizeof *a);
  node->kwargs = NULL;
  node->n_kwargs = 0;
  node->target = t;
  node->args = a;
  node->n_args = n;
  return VL_OK;
}

/* n becomes memory.view(root, size) at offset: size is a view_copy's own size argument, else
 * its shape. */
static vl_status make_alias(folder *x, uint32_t n, uint32_t root, int64_t offset) {
  vl_node *node = &x->g->nodes[n];
  vl_arg args[2] = {{.kind = VL_ARG_REF}, {.kind = VL_ARG_NULL}};
  args[0].u.ref = root;
  vl_status st = x->kind[n] == VL_FOLD_VIEW_COPY
                     ? vl__arg_copy(x->g->store, &node->args[1], &args[1])
                     : int_list_arg(x->g, node->val->shape, node->val->rank, &args[1]);
  if (st == VL_OK) st = rewrite(x->g, node, "memory.view", args, 2);
  if (st != VL_OK) return VL_ERR_NOMEM;
  node->alias_of = storage_of(x, root);
  node->offset = offset;
  return VL_OK;
}

static vl_status make_merged(folder *x, uint32_t n, uint32_t root, const vl_desc *d) {
  vl_arg args[4] = {{.kind = VL_ARG_REF}, {.kind = VL_ARG_NULL}, {.kind = VL_ARG_NULL},
                    int_arg(d->offset)};
  args[0].u.ref = root;
  vl_status st = int_list_arg(x->g, d->shape, d->rank, &args[1]);
  if (st == VL_OK) st = int_list_arg(x->g, d->strides, d->rank, &args[2]);
  if (st == VL_OK) st = rewrite(x->g, &x->g->nodes[n], "aten.as_strided_copy.default", args, 4);
  return st;
}

/* ---- replace ----------------------------------------------------------------------------------- */

static vl_status record(folder *x, uint32_t n, uint32_t reasons, const lower_facts *f) {
  vl_decision *d = &x->r->decisions[x->r->n_decisions];
  vl_status st = vl__decision_init(d, x->g, n, reasons, f);
  if (st != VL_OK) return st;
  x->decision[n] = x->r->n_decisions++;
  return VL_OK;
}

static vl_status replace_with(folder *x, uint32_t n, uint32_t root, int64_t offset,
                              lower_facts *f) {
  int64_t numel = 0;
  /* An empty alias reads nothing: its offset is 0, so it stays inside every base. */
  if (vl_spec_numel(x->g->nodes[n].val, &numel) && numel == 0) offset = 0;
  f->offset = offset;
  vl_status st = record(x, n, 0, f);
  if (st == VL_OK) st = make_alias(x, n, root, offset);
  if (st != VL_OK) return st;
  desc_of_alias(x, n, root, offset);
  x->state[n] = ST_REPLACED;
  /* From here on n shares root's buffer: later decisions see it as an alias. */
  uint32_t nc = vl__alias_class(&x->alias, n), owner = storage_of(x, root);
  x->storage[nc] = owner;
  x->alias.is_output[owner] |= x->alias.is_output[nc];
  int64_t nbytes = 0;
  vl_spec_nbytes(x->g->nodes[n].val, &nbytes);
  x->r->replaced++;
  vl__bytes_add(&x->r->bytes_saved, nbytes);
  return VL_OK;
}

static vl_status keep(folder *x, uint32_t n, uint32_t reasons, lower_facts *f, const cand *c1,
                      uint32_t b, uint32_t p) {
  vl_status st = record(x, n, reasons, f);
  if (st != VL_OK) return st;
  x->state[n] = ST_KEPT;
  x->r->kept++;
  if (c1 != NULL) {
    desc_set(x, n, c1->root, &c1->d);
    x->has_c1[n] = true;
    x->snap[n] = x->own[b] || vl__is_memory_view(&x->g->nodes[b]) ? p : x->snap[b];
  }
  return VL_OK;
}

/* A dynamic node, or a view_copy that writes (kwargs.out, mutates), is never folded: a
 * view_copy is decided as without fold, against its input; others stay copies. */
static vl_status decide_unfolded(folder *x, uint32_t n, uint32_t b, uint32_t p) {
  lower_facts f = VL__FACTS_NONE;
  uint32_t reasons = other_conditions(x, n, b, p, &f);
  if (x->kind[n] != VL_FOLD_VIEW_COPY) {
    reasons |= 1u << VL_REASON_DYNAMIC_SHAPE; /* only dynamic nodes get here */
  } else if (!vl_layout_view_keeps_offsets(x->g->nodes[b].val, x->g->nodes[n].val)) {
    if (!vl_layout_rule_contiguous(x->g->nodes[b].val)) reasons |= 1u << VL_REASON_BASE_LAYOUT;
    if (!vl_layout_rule_contiguous(x->g->nodes[n].val)) reasons |= 1u << VL_REASON_VIEW_LAYOUT;
  }
  f.base = b;
  return reasons == 0 ? replace_with(x, n, b, 0, &f) : keep(x, n, reasons, &f, NULL, b, p);
}

/* Candidates 1 (through b's descriptor) and 2 (from b's own buffer) of node n. */
static int candidates(folder *x, uint32_t n, uint32_t b, cand *c, bool *has_c1) {
  vl_desc in;
  uint32_t root;
  int nc = 0;
  desc_get(x, b, &in, &root);
  bool b_alias = vl__is_memory_view(&x->g->nodes[b]);
  /* as_strided reads its input's buffer: through a copy with a chain it has no candidate 1. */
  bool through = x->kind[n] != VL_FOLD_AS_STRIDED || x->own[b] || b_alias;
  *has_c1 =
      through && chain_intact(x, b, root) && vl__fold_map(x->g, n, x->split_starts, &in, &c[0].d);
  if (*has_c1) c[nc++].root = root;
  if (!b_alias && !x->own[b]) {
    vl_desc_of_spec(x->g->nodes[b].val, 0, &in);
    if (vl__fold_map(x->g, n, x->split_starts, &in, &c[nc].d)) c[nc++].root = b;
  }
  return nc;
}

static vl_status decide(folder *x, uint32_t n, uint32_t b, uint32_t p) {
  const vl_node *node = &x->g->nodes[n];
  if (node->val->dynamic || x->g->nodes[b].val->dynamic || node->out != VL_NO_NODE ||
      node->n_mutates > 0) {
    return decide_unfolded(x, n, b, p);
  }
  cand c[2];
  bool has_c1;
  int nc = candidates(x, n, b, c, &has_c1);
  lower_facts f[2] = {VL__FACTS_NONE, VL__FACTS_NONE};
  uint32_t reasons[2] = {0, 0};
  int first_fit = -1;
  for (int k = 0; k < nc; k++) {
    if (!vl_desc_matches_spec(&c[k].d, node->val)) continue;
    reasons[k] = other_conditions(x, n, c[k].root, p, &f[k]);
    f[k].layout_base = b;
    if (reasons[k] == 0) return replace_with(x, n, c[k].root, c[k].d.offset, &f[k]);
    if (first_fit < 0) first_fit = k;
  }
  const cand *c1 = has_c1 ? &c[0] : NULL;
  if (first_fit >= 0) return keep(x, n, reasons[first_fit], &f[first_fit], c1, b, p);
  lower_facts lf = VL__FACTS_NONE;
  uint32_t r = layout_reason(x, n, b) | other_conditions(x, n, nc > 0 ? c[0].root : b, p, &lf);
  lf.layout_base = b;
  return keep(x, n, r, &lf, c1, b, p);
}

static void note_write(void *p, uint32_t ref) {
  folder *x = p;
  x->last_write[vl__alias_class(&x->alias, ref)] = x->pos;
}

static vl_status decide_getitems(folder *x, uint32_t p) {
  const vl_node *node = &x->g->nodes[p];
  vl_status st = VL_OK;
  x->split_starts = malloc(((size_t)node->n_vals + 1) * sizeof *x->split_starts);
  if (x->split_starts == NULL) return VL_ERR_NOMEM;
  if (!vl__fold_split_starts(node, x->split_starts)) { /* bad arguments: no candidate */
    free(x->split_starts);
    x->split_starts = NULL;
  }
  for (uint32_t k = 0; st == VL_OK && k < node->n_users; k++) {
    uint32_t u = node->users[k];
    if (x->kind[u] == VL_FOLD_GETITEM) st = decide(x, u, x->input[u], p);
  }
  free(x->split_starts);
  x->split_starts = NULL;
  return st;
}

static vl_status decide_all(folder *x) {
  vl_status st = VL_OK;
  for (uint32_t i = 0; st == VL_OK && i < x->g->n_nodes; i++) {
    const vl_node *node = &x->g->nodes[i];
    if (vl__is_memory_view(node) && node->n_args > 0 && node->args[0].kind == VL_ARG_REF) {
      desc_of_alias(x, i, node->args[0].u.ref, node->offset);
    } else if (x->kind[i] != VL_FOLD_NONE && x->kind[i] != VL_FOLD_GETITEM) {
      st = decide(x, i, x->input[i], i);
    }
    /* A split's getitems are decided as if they stood at their producer's place. */
    if (st == VL_OK && vl__fold_is_split(node)) st = decide_getitems(x, i);
    x->pos = i;
    vl__node_for_each_write(node, note_write, x);
  }
  return st;
}

/* ---- merge and dead removal --------------------------------------------------------------------- */

/* A layout-only node or a split producer, unless it writes (a view_copy with kwargs.out or
 * mutates): what it writes is read through that storage, not through its result. */
static bool removable(const folder *x, uint32_t i) {
  if (vl__node_writes(&x->g->nodes[i])) return false;
  return x->kind[i] != VL_FOLD_NONE || vl__fold_is_split(&x->g->nodes[i]);
}

static bool merge_input(const folder *x, uint32_t b) {
  return !x->dead[b] && (x->state[b] == ST_KEPT || x->state[b] == ST_MERGED);
}

typedef struct {
  folder *x;
  uint32_t node;
} drop_ctx;

static void drop_ref(void *p, uint32_t ref) {
  drop_ctx *d = p;
  folder *x = d->x;
  if (x->seen[ref] == d->node) return; /* users count each user once */
  x->seen[ref] = d->node;
  if (--x->users_left[ref] == 0 && removable(x, ref) && !x->dead[ref]) {
    x->dead[ref] = true;
    x->stack[x->n_stack++] = ref;
  } else if (x->users_left[ref] == 1 && merge_input(x, ref)) {
    x->queue[x->n_queue++] = ref;
  }
}

/* The decision of a node removed dead goes; what it would have copied is saved. */
static void count_dead(folder *x, uint32_t i) {
  if (x->kind[i] == VL_FOLD_NONE) return; /* a split producer: counts nowhere */
  x->r->removed_dead++;
  int64_t nbytes = 0;
  vl_spec_nbytes(x->g->nodes[i].val, &nbytes);
  if (x->state[i] == ST_REPLACED) x->r->replaced--;
  if (x->state[i] == ST_KEPT) x->r->kept--;
  if (x->state[i] == ST_MERGED) x->r->merged--;
  if (x->state[i] != ST_REPLACED) vl__bytes_add(&x->r->bytes_saved, nbytes);
}

/* Kills the nodes on the stack and every node that falls dead with them. */
static void drain_dead(folder *x) {
  while (x->n_stack > 0) {
    uint32_t i = x->stack[--x->n_stack];
    count_dead(x, i);
    drop_ctx d = {x, i};
    vl__node_for_each_ref(&x->g->nodes[i], drop_ref, &d);
  }
}

static vl_status try_merge(folder *x, uint32_t n) {
  vl_node *node = &x->g->nodes[n];
  if (x->dead[n] || x->state[n] != ST_KEPT || x->kind[n] == VL_FOLD_GETITEM || !x->has_c1[n]) {
    return VL_OK;
  }
  uint32_t b = node->args[0].u.ref, root = x->root[n];
  if (!merge_input(x, b) || x->users_left[b] != 1 || root == b) return VL_OK;
  vl_desc d;
  desc_get(x, n, &d, &root);
  vl_status st = vl__decision_merged(&x->r->decisions[x->decision[n]], x->g, root, d.offset);
  if (st == VL_OK) st = make_merged(x, n, root, &d);
  if (st != VL_OK) return st;
  x->state[n] = ST_MERGED;
  x->r->kept--;
  x->r->merged++;
  x->users_left[root]++;
  if (--x->users_left[b] == 0) {
    x->dead[b] = true;
    x->stack[x->n_stack++] = b;
    drain_dead(x);
  }
  return VL_OK;
}

/* The live user of b that still reads it as args[0] and could merge, or VL_NO_NODE. */
static uint32_t sole_user(const folder *x, uint32_t b) {
  const vl_node *node = &x->g->nodes[b];
  for (uint32_t k = 0; k < node->n_users; k++) {
    uint32_t u = node->users[k];
    const vl_node *un = &x->g->nodes[u];
    if (!x->dead[u] && x->state[u] == ST_KEPT && un->n_args > 0 && un->args[0].kind == VL_ARG_REF &&
        un->args[0].u.ref == b) {
      return u;
    }
  }
  return VL_NO_NODE;
}

static vl_status merge_and_remove(folder *x) {
  uint32_t n = x->g->n_nodes;
  vl_status st = vl_graph_index_users(x->g); /* replacements rewrote references */
  if (st != VL_OK) return st;
  for (uint32_t i = 0; i < n; i++) {
    x->users_left[i] = x->g->nodes[i].n_users;
    x->seen[i] = VL_NO_NODE;
  }
  for (uint32_t i = n; i-- > 0;) {
    if (x->users_left[i] != 0 || !removable(x, i) || x->dead[i]) continue;
    x->dead[i] = true;
    x->stack[x->n_stack++] = i;
    drain_dead(x);
  }
  x->n_queue = 0;
  for (uint32_t i = 0; st == VL_OK && i < n; i++) st = try_merge(x, i);
  while (st == VL_OK && x->n_queue > 0) {
    uint32_t b = x->queue[--x->n_queue], u;
    if (merge_input(x, b) && x->users_left[b] == 1 && (u = sole_user(x, b)) != VL_NO_NODE) {
      st = try_merge(x, u);
    }
  }
  return st;
}

/* Drops the decisions of dead nodes, keeping the others in order. */
static void drop_dead_decisions(folder *x) {
  vl_report *r = x->r;
  uint32_t k = 0;
  bool *gone = x->own; /* reused: per decision index, below n */
  memset(gone, 0, r->n_decisions * sizeof *gone);
  for (uint32_t i = 0; i < x->g->n_nodes; i++) {
    if (x->dead[i] && x->decision[i] != VL_NO_NODE) gone[x->decision[i]] = true;
  }
  for (uint32_t j = 0; j < r->n_decisions; j++) {
    if (gone[j]) {
      vl__decision_free(&r->decisions[j]);
      continue;
    }
    r->decisions[k++] = r->decisions[j];
  }
  r->n_decisions = k;
}

/* ---- setup ----------------------------------------------------------------------------------- */

static void folder_free(folder *x) {
  vl__alias_free(&x->alias);
  free(x->block);
  free(x->strides);
}

/* The per-node arrays in one zeroed block, widest first (so each is aligned): one allocation
 * that a large graph gets from (and gives back to) the system whole, instead of eighteen that
 * stay in the heap as holes after the pass. */
static bool folder_arrays(folder *x, size_t n) {
  uint32_t **u32[] = {&x->storage,  &x->last_write, &x->input, &x->root, &x->snap,
                      &x->decision, &x->users_left, &x->seen,  &x->stack};
  bool **flags[] = {&x->is_output, &x->own, &x->has_c1, &x->dead};
  enum { U32S = sizeof u32 / sizeof *u32, FLAGS = sizeof flags / sizeof *flags };
  /* offset, stride_at, queue (2 per node: n, plus one per merge), the u32s, flags, kind, state */
  size_t per = sizeof(int64_t) + sizeof(size_t) + (2 + U32S) * sizeof(uint32_t) + FLAGS + 2;
  if (n > SIZE_MAX / per) return false;
  char *b = x->block = calloc(n, per);
  if (b == NULL) return false;
  x->offset = (int64_t *)(void *)b, b += n * sizeof(int64_t);
  x->stride_at = (size_t *)(void *)b, b += n * sizeof(size_t);
  x->queue = (uint32_t *)(void *)b, b += 2 * n * sizeof(uint32_t);
  for (size_t k = 0; k < U32S; k++) *u32[k] = (uint32_t *)(void *)b, b += n * sizeof(uint32_t);
  for (size_t k = 0; k < FLAGS; k++) *flags[k] = (bool *)b, b += n;
  x->kind = (uint8_t *)b, b += n;
  x->state = (uint8_t *)b;
  return true;
}

static vl_status folder_init(folder *x, vl_graph *g, vl_report *r, uint32_t *layout_nodes) {
  uint32_t n = g->n_nodes ? g->n_nodes : 1;
  memset(x, 0, sizeof *x);
  x->g = g;
  x->r = r;
  if (vl__alias_build(&x->alias, g) != VL_OK) return VL_ERR_NOMEM;
  if (!folder_arrays(x, n)) return VL_ERR_NOMEM;
  size_t pool = 0;
  *layout_nodes = 0;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    x->storage[i] = i;
    x->last_write[i] = x->root[i] = x->snap[i] = x->decision[i] = VL_NO_NODE;
    x->own[i] = true;
    x->kind[i] = (uint8_t)vl__fold_kind(g, i, &x->input[i]);
    *layout_nodes += x->kind[i] != VL_FOLD_NONE;
    bool may_point = x->kind[i] != VL_FOLD_NONE || vl__is_memory_view(&g->nodes[i]);
    x->stride_at[i] = may_point ? pool : SIZE_MAX;
    if (may_point) pool += g->nodes[i].val->rank;
  }
  x->strides = malloc((pool ? pool : 1) * sizeof *x->strides);
  if (x->strides == NULL) return VL_ERR_NOMEM;
  const vl_node *out = &g->nodes[g->output];
  for (uint32_t k = 0; k < out->n_args; k++) x->is_output[out->args[k].u.ref] = true;
  return VL_OK;
}

/* What became of each node, before compaction renumbers them. */
static void report_fates(const folder *x, uint8_t *fate) {
  for (uint32_t i = 0; i < x->g->n_nodes; i++) {
    uint8_t st = x->state[i];
    fate[i] = st == ST_REPLACED ? VL_FATE_ALIASED
              : x->dead[i]      ? VL_FATE_DEAD
              : st == ST_OTHER  ? VL_FATE_OTHER
                                : VL_FATE_COPIES;
  }
}

vl_status vl__fold(vl_graph *g, vl_report *r, uint8_t *fate) {
  folder x;
  uint32_t layout_nodes = 0;
  vl_status st = folder_init(&x, g, r, &layout_nodes);
  if (st == VL_OK && layout_nodes > 0) {
    r->decisions = calloc(layout_nodes, sizeof *r->decisions);
    if (r->decisions == NULL) st = VL_ERR_NOMEM;
    if (st == VL_OK) st = decide_all(&x);
    if (st == VL_OK) st = merge_and_remove(&x);
    if (st == VL_OK) {
      if (fate != NULL) report_fates(&x, fate);
      drop_dead_decisions(&x);
      st = vl__lower_compact(g, x.dead);
    }
  } else if (st == VL_OK && fate != NULL) {
    memset(fate, VL_FATE_OTHER, g->n_nodes);
  }
  folder_free(&x);
  return st;
}
