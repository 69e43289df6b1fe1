/* interp.c - the graph interpreter with real aliasing (docs/kernels.md, "Interpreter").
 *
 * Every node that yields a tensor gets a slot: a storage (an owned buffer) and the spec through
 * which the node reads it. A call allocates a fresh storage in its declared layout (node->val);
 * memory.view takes its base's storage with its own declared spec, so a lowering that aliases
 * the wrong layout really reads wrong values; in-place ops (add_, relu_, copy_) and kwargs.out
 * write into the written argument's storage and their node shares that slot. A memory.view
 * may alias a sub-range: its slot starts `offset` elements into the base's (docs/format.md §3).
 * The layout-only ops run as one strided copy through their descriptor map (lower/fold_ops.h),
 * as_strided_copy reads its input's buffer at the given strides, and a split's outputs get one
 * storage each, read by their getitems. Ops come from one table: adding an op is adding a row.
 * Every byte allocated counts against lim->max_total_bytes while it is alive, so the limit
 * bounds the buffers live at once: a storage is freed, and its bytes given back, as soon as
 * every user of every node sharing it has run (see "lifetimes" below). Placeholders' storages
 * and the arena of a planned graph live until the run ends. */
#include "viewlower/layout.h"
#include "viewlower/interp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/lines.h"
#include "exec/elementwise.h"
#include "exec/kernel_internal.h"
#include "graph/storage.h"
#include "layout/tensor_internal.h"
#include "lower/fold_ops.h"
#include "viewlower/copy.h"

#define NO_STORE UINT32_MAX

typedef struct storage {
  void *data; /* NULL once freed */
  int64_t nbytes;
  /* The last node that may read or write it (VL_NO_NODE: not yet known); collect_outputs
   * reuses it as the last output argument that reads it. */
  uint32_t last;
  uint32_t prev, next; /* neighbours in the list of storages dying at node `last` */
  bool in_arena; /* a planned storage: bytes of the arena, not its own buffer */
  bool held;     /* lives until the run ends: in the arena, or a placeholder's */
  bool freed;
} storage;

typedef struct slot {
  uint32_t store; /* index into run.stores, NO_STORE before the node ran */
  vl_spec spec;
  int64_t offset; /* element offset into the store where the node's elements start */
} slot;

typedef struct run {
  const vl_graph *g;
  const vl_limits *lim;
  storage *stores;
  uint32_t n_stores;
  slot *slots;
  int64_t total; /* bytes allocated so far, temporaries included while alive */
  vl_error *err;
  char *arena;    /* a planned graph's arena (docs/format.md §9), else NULL */
  long *input_of; /* per node: the index of a placeholder's value in the inputs, or -1 */
  uint32_t *dies; /* per node: the first storage whose last node it is, or NO_STORE */
} run;

/* A tensor as an op sees it: bytes plus the spec they are read through. */
typedef struct tview {
  void *data; /* the store's bytes from the slot's offset on */
  vl_spec spec;
  uint32_t store;
  int64_t avail; /* bytes of the store from data on */
} tview;

/* ---- memory ------------------------------------------------------------------------------ */

static vl_status budget_take(run *r, int64_t nbytes) {
  if (nbytes > r->lim->max_total_bytes - r->total) {
    return vl_error_set(r->err, VL_ERR_TOO_LARGE, "",
                        "execution needs more than the limit of %lld bytes of buffers",
                        (long long)r->lim->max_total_bytes);
  }
  r->total += nbytes;
  return VL_OK;
}

/* Buffers start on a 64-byte line (base/lines.h), as tensors' storage does; a planned graph's
 * arena at its plan's alignment, from a line up to a page (ARENA_ALIGN_MAX): every tensor the
 * plan places at a multiple of that alignment then starts on one in memory too. A larger
 * alignment is still kept by the offsets inside the arena, not by the arena's start (an
 * alignment of up to 1 GiB would reserve as much address space per run). */
#define BUFFER_ALIGN 64
#define ARENA_ALIGN_MAX 4096

/* A zero-filled buffer of nbytes, counted against the limits. */
static vl_status buffer_new(run *r, int64_t nbytes, void **out) {
  if (nbytes > r->lim->max_tensor_bytes) {
    return vl_error_set(r->err, VL_ERR_TOO_LARGE, "/val",
                        "tensor of %lld bytes exceeds the limit of %lld bytes", (long long)nbytes,
                        (long long)r->lim->max_tensor_bytes);
  }
  vl_status st = budget_take(r, nbytes);
  if (st != VL_OK) return st;
  *out = vl__lines_calloc((size_t)nbytes, BUFFER_ALIGN);
  if (*out == NULL) {
    r->total -= nbytes;
    return vl_error_set(r->err, VL_ERR_NOMEM, "", "out of memory allocating %lld bytes",
                        (long long)nbytes);
  }
  return VL_OK;
}

static void buffer_release(run *r, void *p, int64_t nbytes) {
  if (p == NULL) return;
  vl__lines_free(p);
  r->total -= nbytes;
}

/* A new storage for spec, bound to node i's slot; *v describes it. In a planned graph the
 * storage of a planned owner (owner: the node carrying its mem_offset) is its place in the
 * arena, whatever that holds: an unsafe plan shows as wrong values. */
static vl_status slot_alloc(run *r, uint32_t i, uint32_t owner, const vl_spec *spec, tview *v) {
  int64_t nbytes;
  void *data = NULL;
  if (!vl_spec_nbytes(spec, &nbytes)) {
    return vl_error_set(r->err, VL_ERR_INVALID_GRAPH, "/val", "byte size overflows");
  }
  const vl_node *o = owner != VL_NO_NODE ? &r->g->nodes[owner] : NULL;
  bool in_arena = r->arena != NULL && o != NULL && o->has_mem_offset;
  if (in_arena) {
    /* Validation keeps every range inside the arena; a graph built in process is held to it
     * here too, so no plan can make the interpreter write outside its memory. */
    if (o->mem_offset < 0 || o->mem_offset > r->g->plan_arena_bytes ||
        nbytes > r->g->plan_arena_bytes - o->mem_offset) {
      return vl_error_set(r->err, VL_ERR_INVALID_GRAPH, "/mem_offset",
                          "the storage lies outside the arena of %lld bytes",
                          (long long)r->g->plan_arena_bytes);
    }
    data = r->arena + o->mem_offset;
  } else {
    vl_status st = buffer_new(r, nbytes, &data);
    if (st != VL_OK) return st;
  }
  r->stores[r->n_stores] = (storage){.data = data, .nbytes = nbytes, .last = VL_NO_NODE,
                                     .prev = NO_STORE, .next = NO_STORE, .in_arena = in_arena,
                                     .held = in_arena};
  r->slots[i] = (slot){.store = r->n_stores++, .spec = *spec, .offset = 0};
  *v = (tview){.data = data, .spec = *spec, .store = r->slots[i].store, .avail = nbytes};
  return VL_OK;
}

static tview slot_view(const run *r, uint32_t i) {
  const slot *s = &r->slots[i];
  const storage *st = &r->stores[s->store];
  int64_t skip = s->offset * (int64_t)vl_dtype_size(s->spec.dtype);
  return (tview){.data = (char *)st->data + skip, .spec = s->spec, .store = s->store,
                 .avail = st->nbytes - skip};
}

/* ---- lifetimes ---------------------------------------------------------------------------- */

/* A storage dies once every user of every node sharing it has run. Sharing only ever grows by
 * a node that references one already sharing (memory.view and getitem through args[0], an
 * in-place op through args[0], kwargs.out), and that node is a user, so the storage is still
 * alive when it joins; its own users then extend the storage's life. Each storage not held
 * sits in the list of its last node, and that list is freed once the node has run. */

static void store_unlink(run *r, uint32_t s) {
  storage *st = &r->stores[s];
  if (st->last == VL_NO_NODE) return;
  if (st->prev != NO_STORE) {
    r->stores[st->prev].next = st->next;
  } else {
    r->dies[st->last] = st->next;
  }
  if (st->next != NO_STORE) r->stores[st->next].prev = st->prev;
  st->prev = st->next = NO_STORE;
}

/* Keeps storage s alive at least until node `until` has run. */
static void store_keep(run *r, uint32_t s, uint32_t until) {
  storage *st = &r->stores[s];
  if (st->held || st->freed || (st->last != VL_NO_NODE && st->last >= until)) return;
  store_unlink(r, s);
  st->last = until;
  st->next = r->dies[until];
  if (st->next != NO_STORE) r->stores[st->next].prev = s;
  r->dies[until] = s;
}

static void store_free(run *r, uint32_t s) {
  storage *st = &r->stores[s];
  vl__lines_free(st->data);
  st->data = NULL;
  st->freed = true;
  r->total -= st->nbytes;
}

/* The last node that references node i, or i when none does. */
static uint32_t last_user(const vl_graph *g, uint32_t i) {
  const vl_node *n = &g->nodes[i];
  uint32_t last = i;
  for (uint32_t u = 0; u < n->n_users; u++) {
    if (n->users[u] > last) last = n->users[u];
  }
  return last;
}

/* Node i has run: the storages it bound outlive its users. A split bound one storage per
 * output, each read only through the getitems of its index; any other user (none in a parsed
 * graph) keeps them all. */
static void node_keep(run *r, uint32_t i) {
  const vl_node *n = &r->g->nodes[i];
  uint32_t s = r->slots[i].store;
  if (s == NO_STORE) return;
  if (!vl__fold_is_split(n)) {
    store_keep(r, s, last_user(r->g, i));
    return;
  }
  for (uint32_t k = 0; k < n->n_vals; k++) store_keep(r, s + k, i);
  for (uint32_t u = 0; u < n->n_users; u++) {
    uint32_t user = n->users[u], producer, index;
    if (vl_node_getitem(&r->g->nodes[user], &producer, &index) && producer == i &&
        index < n->n_vals) {
      store_keep(r, s + index, user);
    } else {
      for (uint32_t k = 0; k < n->n_vals; k++) store_keep(r, s + k, user);
    }
  }
}

/* Frees the storages whose last node, i, has run. */
static void free_dead(run *r, uint32_t i) {
  uint32_t s = r->dies[i];
  r->dies[i] = NO_STORE;
  while (s != NO_STORE) {
    uint32_t next = r->stores[s].next;
    store_free(r, s);
    s = next;
  }
}

/* Reading a freed storage would mean a user missing from the graph's users lists (a graph
 * built in process without vl_graph_index_users): an error, never a read of freed memory. */
static vl_status store_check(run *r, uint32_t s) {
  if (!r->stores[s].freed) return VL_OK;
  return vl_error_set(r->err, VL_ERR_INTERNAL, "",
                      "a tensor was freed before this node, which reads it, ran: the graph's "
                      "users are stale");
}

static void run_free(run *r) {
  for (uint32_t i = 0; i < r->n_stores; i++) {
    if (!r->stores[i].in_arena) vl__lines_free(r->stores[i].data);
  }
  vl__lines_free(r->arena);
  free(r->input_of);
  free(r->dies);
  free(r->stores);
  free(r->slots);
}

/* ---- arguments --------------------------------------------------------------------------- */

static vl_status arg_error(run *r, uint32_t k, const char *what) {
  char path[32];
  snprintf(path, sizeof path, "/args/%u", k);
  return vl_error_set(r->err, VL_ERR_INVALID_GRAPH, path, "argument %u must be %s", k, what);
}

/* Argument k of node n as a tensor that has been computed. */
static vl_status arg_tensor(run *r, const vl_node *n, uint32_t k, tview *v) {
  if (k >= n->n_args || n->args[k].kind != VL_ARG_REF ||
      r->slots[n->args[k].u.ref].store == NO_STORE) {
    return arg_error(r, k, "a tensor");
  }
  vl_status st = store_check(r, r->slots[n->args[k].u.ref].store);
  if (st == VL_OK) *v = slot_view(r, n->args[k].u.ref);
  return st;
}

static vl_status arg_int_list(run *r, const vl_node *n, uint32_t k, int64_t *v, size_t *count) {
  if (k >= n->n_args || n->args[k].kind != VL_ARG_LIST || n->args[k].count > VL_MAX_RANK) {
    return arg_error(r, k, "a list of at most 16 integers");
  }
  const vl_arg *list = &n->args[k];
  for (uint32_t j = 0; j < list->count; j++) {
    if (list->u.items[j].kind != VL_ARG_INT) return arg_error(r, k, "a list of integers");
    v[j] = list->u.items[j].u.i;
  }
  *count = list->count;
  return VL_OK;
}

static vl_tensor as_tensor(const tview *v) {
  int64_t nbytes = 0;
  vl_spec_nbytes(&v->spec, &nbytes);
  return (vl_tensor){.spec = v->spec, .nbytes = nbytes, .data = v->data};
}

static bool same_shape(const vl_spec *a, const vl_spec *b) {
  return a->rank == b->rank && memcmp(a->shape, b->shape, a->rank * sizeof a->shape[0]) == 0;
}

static vl_status shape_error(run *r, const char *what, const vl_spec *a, const vl_spec *b) {
  char sa[160], sb[160];
  return vl_error_set(r->err, VL_ERR_KERNEL, "", "%s: shape %s differs from %s", what,
                      vl__shape_text(sa, sizeof sa, a->rank, a->shape),
                      vl__shape_text(sb, sizeof sb, b->rank, b->shape));
}

/* ---- contiguous logical arrays (for elementwise ops) -------------------------------------- */

/* v's elements in logical order as dtype dt: v's own bytes when that already holds (and the
 * caller allows it), else a new temporary (*tmp, tmp_bytes set; release with buffer_release). */
static vl_status logical_array(run *r, const tview *v, vl_dtype dt, bool allow_alias,
                               const void **out, void **tmp, int64_t *tmp_bytes) {
  int64_t numel = 0, nbytes;
  *tmp = NULL;
  *tmp_bytes = 0;
  if (allow_alias && v->spec.dtype == dt && vl_layout_is_contiguous(&v->spec)) {
    *out = v->data;
    return VL_OK;
  }
  vl_spec_numel(&v->spec, &numel);
  vl_spec dense = v->spec;
  vl_dim_order_default(dense.dim_order, dense.rank);
  dense.dtype = dt;
  vl_spec_nbytes(&dense, &nbytes);
  int64_t extra = 0, total;
  if (v->spec.dtype != dt) vl_spec_nbytes(&v->spec, &extra); /* the uncast copy goes after */
  if (__builtin_add_overflow(nbytes, extra, &total)) {
    return vl_error_set(r->err, VL_ERR_TOO_LARGE, "", "temporary buffer size overflows");
  }
  vl_status st = buffer_new(r, total, tmp);
  if (st != VL_OK) return st;
  *tmp_bytes = total;
  char *same = v->spec.dtype == dt ? *tmp : (char *)*tmp + nbytes;
  dense.dtype = v->spec.dtype;
  st = vl_copy_logical(&dense, same, &v->spec, v->data, r->err);
  if (st == VL_OK && v->spec.dtype != dt) vl__ew_cast(dt, *tmp, v->spec.dtype, same, numel);
  *out = *tmp;
  return st;
}

/* Writes the contiguous logical array res into dst (layout and all). */
static vl_status store_logical(run *r, const tview *dst, const void *res) {
  vl_spec dense = dst->spec;
  vl_dim_order_default(dense.dim_order, dense.rank);
  return vl_copy_logical(&dst->spec, dst->data, &dense, res, r->err);
}

/* ---- node destinations -------------------------------------------------------------------- */

/* Where node i writes: kwargs.out's storage, an in-place op's arg 0, or a fresh storage in the
 * node's declared layout. The node's slot is set to it. *fresh: nothing else can see it. */
static vl_status node_dest(run *r, uint32_t i, bool inplace, tview *dst, bool *fresh) {
  const vl_node *n = &r->g->nodes[i];
  *fresh = false;
  if (inplace && (n->n_args == 0 || n->args[0].kind != VL_ARG_REF)) {
    return arg_error(r, 0, "a tensor");
  }
  if (n->out != VL_NO_NODE || inplace) {
    uint32_t w = n->out != VL_NO_NODE ? n->out : n->args[0].u.ref;
    if (r->slots[w].store == NO_STORE) {
      return vl_error_set(r->err, VL_ERR_INVALID_GRAPH,
                          n->out != VL_NO_NODE ? "/kwargs/out" : "/args/0",
                          "the written argument is not a computed tensor");
    }
    vl_status st = store_check(r, r->slots[w].store);
    if (st != VL_OK) return st;
    r->slots[i] = r->slots[w];
    *dst = slot_view(r, w);
    return VL_OK;
  }
  *fresh = true;
  return slot_alloc(r, i, i, n->val, dst);
}

/* ---- ops ----------------------------------------------------------------------------------- */

typedef vl_status (*op_fn)(run *r, uint32_t i, const tview *dst, bool fresh);

static vl_status op_view_copy(run *r, uint32_t i, const tview *dst, bool fresh) {
  const vl_node *n = &r->g->nodes[i];
  int64_t size[VL_MAX_RANK];
  size_t rank = 0;
  tview self;
  (void)fresh;
  vl_status st = arg_tensor(r, n, 0, &self);
  if (st == VL_OK) st = arg_int_list(r, n, 1, size, &rank);
  if (st != VL_OK) return st;
  vl_tensor in = as_tensor(&self), out = as_tensor(dst);
  return vl_view_copy_out(&in, size, rank, &out, r->err);
}

/* Copies src into dst in logical order, casting when dtypes differ. A source sharing dst's
 * storage is first copied out, so overlapping layouts cannot smear. */
static vl_status copy_into(run *r, const tview *dst, const tview *src) {
  if (!same_shape(&dst->spec, &src->spec)) return shape_error(r, "copy", &src->spec, &dst->spec);
  if (src->spec.dtype == dst->spec.dtype && src->store != dst->store) {
    return vl_copy_logical(&dst->spec, dst->data, &src->spec, src->data, r->err);
  }
  const void *arr;
  void *tmp;
  int64_t tmp_bytes;
  vl_status st = logical_array(r, src, dst->spec.dtype, false, &arr, &tmp, &tmp_bytes);
  if (st == VL_OK) st = store_logical(r, dst, arr);
  buffer_release(r, tmp, tmp_bytes);
  return st;
}

/* _to_copy, clone and their dim_order spellings: the declared val says the layout (and dtype). */
static vl_status op_layout_copy(run *r, uint32_t i, const tview *dst, bool fresh) {
  tview self;
  (void)fresh;
  vl_status st = arg_tensor(r, &r->g->nodes[i], 0, &self);
  return st != VL_OK ? st : copy_into(r, dst, &self);
}

static vl_status op_copy_(run *r, uint32_t i, const tview *dst, bool fresh) {
  tview src;
  (void)fresh;
  vl_status st = arg_tensor(r, &r->g->nodes[i], 1, &src);
  return st != VL_OK ? st : copy_into(r, dst, &src);
}

/* The second operand of a binary op: a tensor of dst's shape, or a number literal. */
typedef struct operand {
  const void *data;
  bool scalar;
  void *tmp;
  int64_t tmp_bytes;
  uint64_t elem; /* storage for a scalar (8 bytes, aligned for every dtype) */
} operand;

static vl_status operand_get(run *r, const vl_node *n, uint32_t k, const tview *dst, operand *o) {
  o->tmp = NULL;
  o->tmp_bytes = 0;
  o->scalar = k < n->n_args && n->args[k].kind != VL_ARG_REF;
  if (o->scalar) {
    if (!vl__ew_scalar(dst->spec.dtype, &n->args[k], &o->elem)) {
      return arg_error(r, k, "a tensor or a number");
    }
    o->data = &o->elem;
    return VL_OK;
  }
  tview v;
  vl_status st = arg_tensor(r, n, k, &v);
  if (st == VL_OK && !same_shape(&v.spec, &dst->spec)) {
    st = shape_error(r, n->target, &v.spec, &dst->spec);
  }
  if (st != VL_OK) return st;
  return logical_array(r, &v, dst->spec.dtype, true, &o->data, &o->tmp, &o->tmp_bytes);
}

/* Computes into a contiguous result: dst itself when fresh and contiguous, else a temporary. */
static vl_status result_begin(run *r, const tview *dst, bool fresh, void **res, void **tmp,
                              int64_t *tmp_bytes) {
  *tmp = NULL;
  *tmp_bytes = 0;
  if (fresh && vl_layout_is_contiguous(&dst->spec)) {
    *res = dst->data;
    return VL_OK;
  }
  vl_spec_nbytes(&dst->spec, tmp_bytes);
  vl_status st = buffer_new(r, *tmp_bytes, tmp);
  if (st != VL_OK) *tmp_bytes = 0;
  *res = *tmp;
  return st;
}

static vl_status result_end(run *r, const tview *dst, void *tmp, int64_t tmp_bytes, vl_status st) {
  if (st == VL_OK && tmp != NULL) st = store_logical(r, dst, tmp);
  buffer_release(r, tmp, tmp_bytes);
  return st;
}

/* b * alpha in place, for add(a, b, alpha=...) with alpha other than 1. */
static vl_status apply_alpha(run *r, const vl_node *n, const tview *dst, operand *b,
                             int64_t numel) {
  const vl_arg *alpha = vl_node_kwarg(n, "alpha");
  uint64_t ae = 0;
  if (alpha == NULL || (alpha->kind == VL_ARG_INT && alpha->u.i == 1)) return VL_OK;
  if (!vl__ew_scalar(dst->spec.dtype, alpha, &ae)) {
    return vl_error_set(r->err, VL_ERR_INVALID_GRAPH, "/kwargs/alpha", "must be a number");
  }
  int64_t count = b->scalar ? 1 : numel;
  if (b->tmp == NULL) {
    int64_t nbytes = count * (int64_t)vl_dtype_size(dst->spec.dtype);
    vl_status st = buffer_new(r, nbytes, &b->tmp);
    if (st != VL_OK) return st;
    b->tmp_bytes = nbytes;
    memcpy(b->tmp, b->data, (size_t)nbytes);
    b->data = b->tmp;
  }
  vl__ew_binary(dst->spec.dtype, VL__EW_MUL, b->tmp, b->tmp, &ae, true, count);
  return VL_OK;
}

static vl_status binary(run *r, uint32_t i, const tview *dst, bool fresh, vl__ew_op op) {
  const vl_node *n = &r->g->nodes[i];
  operand a = {0}, b = {0};
  void *res = NULL, *tmp = NULL;
  int64_t numel = 0, tmp_bytes = 0;
  vl_spec_numel(&dst->spec, &numel);
  vl_status st = operand_get(r, n, 0, dst, &a);
  if (st == VL_OK && a.scalar) st = arg_error(r, 0, "a tensor");
  if (st == VL_OK) st = operand_get(r, n, 1, dst, &b);
  if (st == VL_OK && op == VL__EW_ADD) st = apply_alpha(r, n, dst, &b, numel);
  if (st == VL_OK) st = result_begin(r, dst, fresh, &res, &tmp, &tmp_bytes);
  if (st == VL_OK) vl__ew_binary(dst->spec.dtype, op, res, a.data, b.data, b.scalar, numel);
  st = result_end(r, dst, tmp, tmp_bytes, st);
  buffer_release(r, a.tmp, a.tmp_bytes);
  buffer_release(r, b.tmp, b.tmp_bytes);
  return st;
}

static vl_status op_add(run *r, uint32_t i, const tview *dst, bool fresh) {
  return binary(r, i, dst, fresh, VL__EW_ADD);
}

static vl_status op_mul(run *r, uint32_t i, const tview *dst, bool fresh) {
  return binary(r, i, dst, fresh, VL__EW_MUL);
}

static vl_status op_relu(run *r, uint32_t i, const tview *dst, bool fresh) {
  operand a = {0};
  void *res = NULL, *tmp = NULL;
  int64_t numel = 0, tmp_bytes = 0;
  vl_spec_numel(&dst->spec, &numel);
  vl_status st = operand_get(r, &r->g->nodes[i], 0, dst, &a);
  if (st == VL_OK && a.scalar) st = arg_error(r, 0, "a tensor");
  if (st == VL_OK) st = result_begin(r, dst, fresh, &res, &tmp, &tmp_bytes);
  if (st == VL_OK) vl__ew_relu(dst->spec.dtype, res, a.data, numel);
  st = result_end(r, dst, tmp, tmp_bytes, st);
  buffer_release(r, a.tmp, a.tmp_bytes);
  return st;
}

/* The bytes d reads from its start: 0 when it has no element, else up to its last element. */
static bool desc_bytes(const vl_desc *d, vl_dtype dt, int64_t *bytes) {
  int64_t last;
  bool empty;
  if (!vl_desc_extent(d, &last, &empty)) return false;
  *bytes = 0;
  return empty || !__builtin_mul_overflow(last + 1, (int64_t)vl_dtype_size(dt), bytes);
}

/* memory.view: no buffer of its own; the base's storage, from the base's own start plus the
 * node's offset, read through this node's spec. */
static vl_status op_memory_view(run *r, uint32_t i) {
  const vl_node *n = &r->g->nodes[i];
  tview base;
  int64_t need;
  vl_desc d;
  vl_status st = arg_tensor(r, n, 0, &base);
  if (st != VL_OK) return st;
  vl_desc_of_spec(n->val, n->offset, &d);
  if (n->val->dtype != base.spec.dtype || !desc_bytes(&d, n->val->dtype, &need) ||
      need > base.avail) {
    return vl_error_set(r->err, VL_ERR_INVALID_GRAPH, "/val",
                        "memory.view of %s at offset %lld cannot alias the %lld bytes of its base",
                        vl_dtype_name(n->val->dtype), (long long)n->offset, (long long)base.avail);
  }
  r->slots[i] = (slot){.store = base.store,
                       .spec = *n->val,
                       .offset = r->slots[n->args[0].u.ref].offset + n->offset};
  return VL_OK;
}

/* Copies the elements descriptor d (relative to src's start) names into dst, in logical order. */
static void copy_desc(const tview *dst, const tview *src, const vl_desc *d) {
  int64_t numel = 0, ds[VL_MAX_RANK];
  vl_spec_numel(&dst->spec, &numel);
  if (numel == 0) return;
  size_t esz = vl_dtype_size(dst->spec.dtype);
  vl_layout_strides(&dst->spec, ds);
  vl_copy_strided(esz, d->rank, d->shape, dst->data, ds,
                  (const char *)src->data + d->offset * (int64_t)esz, d->strides);
}

/* Node i's arguments give no view of input (NULL: a split's, not explained further). */
static vl_status bad_args(run *r, uint32_t i, const vl_spec *input) {
  const vl_node *n = &r->g->nodes[i];
  char path[64], msg[400];
  if (input != NULL && vl__fold_why(r->g, i, input, path, sizeof path, msg, sizeof msg)) {
    return vl_error_set(r->err, VL_ERR_KERNEL, path, "%s: %s", n->target, msg);
  }
  return vl_error_set(r->err, VL_ERR_KERNEL, "/args",
                      "%s: the arguments are out of range for the input, or give another shape "
                      "than val",
                      n->target);
}

/* A layout-only op (docs/format.md §3) other than view_copy and the conversions: one strided copy
 * through the op's descriptor map (as_strided: its input's buffer, bounds checked). */
static vl_status op_strided(run *r, uint32_t i, const tview *dst, bool fresh) {
  const vl_node *n = &r->g->nodes[i];
  tview self;
  vl_desc in, d;
  int64_t need;
  (void)fresh;
  vl_status st = arg_tensor(r, n, 0, &self);
  if (st != VL_OK) return st;
  if (self.spec.dtype != dst->spec.dtype) {
    return vl_error_set(r->err, VL_ERR_KERNEL, "/val/dtype", "%s: dtype %s differs from %s",
                        n->target, vl_dtype_name(dst->spec.dtype), vl_dtype_name(self.spec.dtype));
  }
  vl_desc_of_spec(&self.spec, 0, &in);
  if (!vl__fold_map(r->g, i, NULL, &in, &d)) {
    if (strcmp(n->target, "aten._reshape_alias_copy.default") != 0) {
      return bad_args(r, i, &self.spec);
    }
    /* A reshape without a strided alias copies in logical order, as view_copy does. */
    return op_view_copy(r, i, dst, fresh);
  }
  if (!desc_bytes(&d, self.spec.dtype, &need) || need > self.avail) {
    return vl_error_set(r->err, VL_ERR_KERNEL, "/args",
                        "%s reads past the %lld bytes of its input's buffer", n->target,
                        (long long)self.avail);
  }
  copy_desc(dst, &self, &d);
  return VL_OK;
}

/* A split (split_copy, split_with_sizes_copy, unbind_copy): one storage per output, each the
 * slice (or select) of the input that output is; slot i names the first. */
/* The getitem that owns each output k of node i in a plan (the first one of that output), or
 * VL_NO_NODE when no getitem reads it: one pass over the users (a search per output cost 256
 * passes over a split's users). */
static void output_owners(const vl_graph *g, uint32_t i, uint32_t *owner) {
  const vl_node *n = &g->nodes[i];
  for (uint32_t k = 0; k < n->n_vals; k++) owner[k] = VL_NO_NODE;
  for (uint32_t u = 0; u < n->n_users; u++) {
    uint32_t producer, index;
    if (vl_node_getitem(&g->nodes[n->users[u]], &producer, &index) && producer == i &&
        index < n->n_vals && owner[index] == VL_NO_NODE) {
      owner[index] = n->users[u];
    }
  }
}

static vl_status exec_split(run *r, uint32_t i) {
  const vl_node *n = &r->g->nodes[i];
  tview self, dst;
  vl_desc in, d;
  vl_status st = arg_tensor(r, n, 0, &self);
  if (st != VL_OK) return st;
  vl_desc_of_spec(&self.spec, 0, &in);
  uint32_t first = r->n_stores;
  int64_t *starts = malloc(((size_t)n->n_vals + 1) * sizeof *starts);
  uint32_t *owner = malloc(((size_t)n->n_vals + 1) * sizeof *owner);
  if (starts == NULL || owner == NULL) {
    free(starts);
    free(owner);
    return vl_error_set(r->err, VL_ERR_NOMEM, "", "out of memory");
  }
  output_owners(r->g, i, owner);
  st = vl__fold_split_starts(n, starts) ? VL_OK : bad_args(r, i, NULL);
  for (uint32_t k = 0; st == VL_OK && k < n->n_vals; k++) {
    const vl_spec *v = &n->vals[k];
    if (v->dtype != self.spec.dtype || !vl__fold_split_output(n, k, starts, &in, &d) ||
        d.rank != v->rank || memcmp(d.shape, v->shape, d.rank * sizeof d.shape[0]) != 0) {
      st = bad_args(r, i, NULL);
      break;
    }
    st = slot_alloc(r, i, owner[k], v, &dst);
    if (st == VL_OK) copy_desc(&dst, &self, &d);
  }
  free(starts);
  free(owner);
  if (st != VL_OK) return st;
  r->slots[i] = (slot){.store = first, .spec = self.spec, .offset = 0};
  return VL_OK;
}

/* operator.getitem of a split: output index of the producer, its own storage. */
static vl_status exec_getitem(run *r, uint32_t i, uint32_t producer, uint32_t index) {
  if (r->slots[producer].store == NO_STORE) {
    return vl_error_set(r->err, VL_ERR_INVALID_GRAPH, "/args/0", "the producer has not run");
  }
  r->slots[i] = (slot){.store = r->slots[producer].store + index,
                       .spec = r->g->nodes[producer].vals[index], .offset = 0};
  return VL_OK;
}

typedef enum { OP_NEW, OP_INPLACE, OP_ALIAS } op_kind;

typedef struct op_row {
  const char *target;
  op_kind kind;
  op_fn fn;
} op_row;

static const op_row op_table[] = {
    {"aten.view_copy.default", OP_NEW, op_view_copy},
    {"memory.view", OP_ALIAS, NULL},
    {"aten.permute_copy.default", OP_NEW, op_strided},
    {"aten.transpose_copy.int", OP_NEW, op_strided},
    {"aten._to_copy.default", OP_NEW, op_layout_copy},
    {"aten.clone.default", OP_NEW, op_layout_copy},
    {"dim_order_ops._to_dim_order_copy.default", OP_NEW, op_layout_copy},
    {"dim_order_ops._clone_dim_order.default", OP_NEW, op_layout_copy},
    {"aten.add.Tensor", OP_NEW, op_add},
    {"aten.add_.Tensor", OP_INPLACE, op_add},
    {"aten.mul.Tensor", OP_NEW, op_mul},
    {"aten.relu.default", OP_NEW, op_relu},
    {"aten.relu_.default", OP_INPLACE, op_relu},
    {"aten.copy_.default", OP_INPLACE, op_copy_},
    {"aten._reshape_alias_copy.default", OP_NEW, op_strided},
    {"aten.t_copy.default", OP_NEW, op_strided},
    {"aten.squeeze_copy.default", OP_NEW, op_strided},
    {"aten.squeeze_copy.dim", OP_NEW, op_strided},
    {"aten.squeeze_copy.dims", OP_NEW, op_strided},
    {"aten.unsqueeze_copy.default", OP_NEW, op_strided},
    {"aten.alias_copy.default", OP_NEW, op_strided},
    {"aten.slice_copy.Tensor", OP_NEW, op_strided},
    {"aten.select_copy.int", OP_NEW, op_strided},
    {"aten.as_strided_copy.default", OP_NEW, op_strided},
};

static const op_row *op_find(const char *target) {
  for (size_t k = 0; k < sizeof op_table / sizeof op_table[0]; k++) {
    if (strcmp(op_table[k].target, target) == 0) return &op_table[k];
  }
  return NULL;
}

/* Runs call node i; error paths come back relative to the node. */
static vl_status exec_call(run *r, uint32_t i) {
  const vl_node *n = &r->g->nodes[i];
  const op_row *op = op_find(n->target);
  tview dst;
  bool fresh;
  uint32_t producer, index;
  if (vl__fold_is_split(n)) return exec_split(r, i);
  if (vl_node_getitem(n, &producer, &index) && vl__fold_is_split(&r->g->nodes[producer])) {
    return exec_getitem(r, i, producer, index);
  }
  if (op == NULL || n->n_vals > 0) { /* several outputs (vals): as an unknown target */
    return vl_error_set(r->err, VL_ERR_UNSUPPORTED, "/target",
                        "%s: target %s is not supported by the interpreter%s", n->name, n->target,
                        n->n_vals > 0 ? " (a node with several outputs)" : "");
  }
  if (!n->has_val) return vl_error_set(r->err, VL_ERR_INVALID_GRAPH, "/val", "is required");
  if (op->kind == OP_ALIAS) return op_memory_view(r, i);
  vl_status st = node_dest(r, i, op->kind == OP_INPLACE, &dst, &fresh);
  return st != VL_OK ? st : op->fn(r, i, &dst, fresh);
}

/* ---- inputs and outputs ---------------------------------------------------------------------- */

/* Binds placeholder i to its input, converted to the placeholder's layout. */
static vl_status exec_placeholder(run *r, uint32_t i, const vl_tensor_map *inputs) {
  const vl_node *n = &r->g->nodes[i];
  long k = r->input_of[i];
  char sa[160], sb[160];
  tview dst;
  if (k < 0) {
    return vl_error_set(r->err, VL_ERR_INVALID_PARAMS, "", "no value for placeholder %s", n->name);
  }
  const vl_tensor *t = inputs->tensors[k];
  if (t->spec.dtype != n->val->dtype) {
    return vl_error_set(r->err, VL_ERR_INVALID_TENSOR, "/dtype", "is %s, placeholder %s is %s",
                        vl_dtype_name(t->spec.dtype), n->name, vl_dtype_name(n->val->dtype));
  }
  if (!same_shape(&t->spec, n->val)) {
    return vl_error_set(r->err, VL_ERR_INVALID_TENSOR, "/shape", "is %s, placeholder %s is %s",
                        vl__shape_text(sa, sizeof sa, t->spec.rank, t->spec.shape), n->name,
                        vl__shape_text(sb, sizeof sb, n->val->rank, n->val->shape));
  }
  vl_status st = slot_alloc(r, i, i, n->val, &dst);
  if (st != VL_OK) return st;
  /* The copy stands for the caller's input, which lives through the whole call: held, so the
   * limit counts every input for the whole run (and a write into it stays in place). */
  r->stores[dst.store].held = true;
  return vl_copy_logical(&dst.spec, dst.data, &t->spec, t->data, r->err);
}

/* One fresh tensor per output arg, in the referenced node's declared layout. Every node has
 * run, so the output arguments are the storages' only readers left: each is freed once the
 * last argument reading it is copied out. */
static vl_status collect_outputs(run *r, vl_tensor_map *m) {
  const vl_node *o = &r->g->nodes[r->g->output];
  for (uint32_t k = 0; k < o->n_args; k++) {
    if (o->args[k].kind != VL_ARG_REF) continue;
    uint32_t s = r->slots[o->args[k].u.ref].store;
    if (s != NO_STORE) r->stores[s].last = k;
  }
  for (uint32_t k = 0; k < o->n_args; k++) {
    tview v;
    vl_status st = arg_tensor(r, o, k, &v);
    if (st != VL_OK) return st;
    const vl_node *src = &r->g->nodes[o->args[k].u.ref];
    int64_t nbytes = 0;
    vl_spec_nbytes(src->val, &nbytes);
    st = budget_take(r, nbytes);
    if (st == VL_OK) st = vl__tensor_map_add(m, src->name, src->val, r->lim, r->err);
    if (st == VL_OK) {
      st = vl_copy_logical(src->val, m->tensors[m->count - 1]->data, &v.spec, v.data, r->err);
    }
    if (st != VL_OK) return st;
    const storage *sv = &r->stores[v.store];
    if (!sv->held && sv->last == k) store_free(r, v.store);
  }
  return VL_OK;
}

/* A plan at an alignment below 8 may put a tensor where its dtype cannot start (a float64 at
 * an odd byte): valid (the invariant of docs/format.md §9), but no kernel can read it, so it is
 * refused before anything runs. The planner itself never does this (vl__storage_elem_align). */
static vl_status arena_aligned(const vl_graph *g, vl_error *err) {
  for (uint32_t i = 0; g->has_plan && i < g->n_nodes; i++) {
    const vl_node *n = &g->nodes[i];
    if (!n->has_mem_offset || !n->has_val) continue;
    int64_t align = vl__storage_elem_align(n->val);
    if (n->mem_offset % align == 0) continue;
    char path[48];
    snprintf(path, sizeof path, "/nodes/%u/mem_offset", i);
    return vl_error_set(err, VL_ERR_KERNEL, path,
                        "%lld is not a multiple of %lld, the size of a %s element: the "
                        "interpreter cannot start %s's tensor there",
                        (long long)n->mem_offset, (long long)align, vl_dtype_name(n->val->dtype),
                        n->name);
  }
  return VL_OK;
}

static vl_status run_init(run *r, const vl_graph *g, const vl_limits *lim, vl_error *err) {
  memset(r, 0, sizeof *r);
  r->g = g;
  r->lim = lim;
  r->err = err;
  size_t stores = g->n_nodes + 1;
  for (uint32_t i = 0; i < g->n_nodes; i++) stores += g->nodes[i].n_vals;
  r->stores = calloc(stores, sizeof *r->stores);
  r->slots = calloc(g->n_nodes > 0 ? g->n_nodes : 1, sizeof *r->slots);
  r->dies = malloc((g->n_nodes > 0 ? g->n_nodes : 1) * sizeof *r->dies);
  if (r->stores == NULL || r->slots == NULL || r->dies == NULL) {
    return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory for %u nodes", g->n_nodes);
  }
  for (uint32_t i = 0; i < g->n_nodes; i++) r->slots[i].store = r->dies[i] = NO_STORE;
  if (g->has_plan) { /* every planned storage lives in one arena of the plan's size */
    int64_t bytes = g->plan_arena_bytes;
    if (budget_take(r, bytes) != VL_OK) {
      return vl_error_set(err, VL_ERR_TOO_LARGE, "/plan/arena_bytes",
                          "an arena of %lld bytes is over the execution limit of %lld bytes",
                          (long long)bytes, (long long)lim->max_total_bytes);
    }
    int64_t align = g->plan_alignment < BUFFER_ALIGN      ? BUFFER_ALIGN
                    : g->plan_alignment > ARENA_ALIGN_MAX ? ARENA_ALIGN_MAX
                                                          : g->plan_alignment;
    r->arena = vl__lines_calloc((size_t)bytes, (size_t)align);
    if (r->arena == NULL) {
      return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory for an arena of %lld bytes",
                          (long long)bytes);
    }
  }
  return arena_aligned(g, err);
}

/* Puts the failing node's place in front of the error path: the input's name for a missing or
 * mismatched input (relative to the inputs object), else the node's pointer in the graph. */
static void error_locate(run *r, uint32_t i, vl_status st) {
  const vl_node *n = &r->g->nodes[i];
  char prefix[VL_ERROR_PATH_MAX] = "";
  if (n->op == VL_NODE_PLACEHOLDER &&
      (st == VL_ERR_INVALID_PARAMS || st == VL_ERR_INVALID_TENSOR)) {
    vl_pointer_append(prefix, sizeof prefix, n->name);
  } else {
    snprintf(prefix, sizeof prefix, "/nodes/%u", i);
  }
  vl_error_prefix(r->err, prefix);
}

static vl_status run_nodes(run *r, const vl_tensor_map *inputs) {
  for (uint32_t i = 0; i < r->g->n_nodes; i++) {
    const vl_node *n = &r->g->nodes[i];
    vl_status st = VL_OK;
    if (n->op == VL_NODE_PLACEHOLDER) {
      st = exec_placeholder(r, i, inputs);
    } else if (n->op == VL_NODE_CALL) {
      st = exec_call(r, i);
    }
    if (st != VL_OK) {
      error_locate(r, i, st);
      return st;
    }
    /* The output node's readers are copied out by collect_outputs, after this loop. */
    if (n->op == VL_NODE_OUTPUT) continue;
    node_keep(r, i);
    free_dead(r, i);
  }
  return VL_OK;
}

vl_status vl_interp_run(const vl_graph *g, const vl_tensor_map *inputs, const vl_limits *lim,
                        vl_tensor_map **outputs, vl_error *err) {
  vl_limits deflim;
  vl_error local;
  run r;
  vl_tensor_map *m = NULL;
  if (err == NULL) err = &local;
  lim = vl__limits_or_default(lim, &deflim);
  vl_status st = run_init(&r, g, lim, err);
  if (st == VL_OK) st = vl__inputs_check_names(g, inputs, err);
  if (st == VL_OK) st = vl__inputs_index(g, inputs, &r.input_of, err);
  if (st == VL_OK) st = run_nodes(&r, inputs);
  if (st == VL_OK) st = vl__tensor_map_new(&m, err);
  if (st == VL_OK) {
    st = collect_outputs(&r, m);
    if (st != VL_OK) error_locate(&r, g->output, st);
  }
  run_free(&r);
  if (st != VL_OK) {
    vl_tensor_map_free(m);
    return st;
  }
  *outputs = m;
  return VL_OK;
}
