/* graph.c - the graph model: ownership (free, clone), reference walking and rewriting, the
 * users index, and target classification shared by the passes and the interpreter. */
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "graph/store.h"

/* src into dst, lists and strings copied into s (references kept as they are). */
vl_status vl__arg_copy(vl__store *s, const vl_arg *src, vl_arg *dst) {
  *dst = *src;
  if (src->kind == VL_ARG_STRING) {
    dst->u.s = vl__store_intern(s, src->u.s, strlen(src->u.s));
    return dst->u.s ? VL_OK : VL_ERR_NOMEM;
  }
  if (src->kind != VL_ARG_LIST || src->count == 0) return VL_OK;
  dst->u.items = vl__store_alloc(s, src->count * sizeof(vl_arg));
  if (dst->u.items == NULL) return VL_ERR_NOMEM;
  for (uint32_t i = 0; i < src->count; i++) {
    if (vl__arg_copy(s, &src->u.items[i], &dst->u.items[i]) != VL_OK) {
      return VL_ERR_NOMEM;
    }
  }
  return VL_OK;
}

vl_graph *vl__graph_new(void) {
  vl_graph *g = calloc(1, sizeof *g);
  if (g == NULL) return NULL;
  if ((g->store = vl__store_new()) == NULL) {
    free(g);
    return NULL;
  }
  g->output = VL_NO_NODE;
  return g;
}

void vl__graph_fit(vl_graph *g) {
  if (g->n_nodes == 0) return;
  vl_node *fit = realloc(g->nodes, g->n_nodes * sizeof *fit);
  if (fit != NULL) g->nodes = fit;
}

void vl_graph_free(vl_graph *g) {
  if (g == NULL) return;
  free(g->nodes);
  vl__store_free(g->store);
  free(g);
}

/* Every tensor in arg a: a reference, or the references in a (nested) list of them, as for
 * "aten.cat" or "_foreach_add_" whose arg 0 is a list of tensors. */
static void arg_for_each_ref(const vl_arg *a, vl__ref_fn fn, void *ctx) {
  if (a->kind == VL_ARG_REF) fn(ctx, a->u.ref);
  if (a->kind == VL_ARG_LIST) {
    for (uint32_t i = 0; i < a->count; i++) arg_for_each_ref(&a->u.items[i], fn, ctx);
  }
}

void vl__node_for_each_ref(const vl_node *n, vl__ref_fn fn, void *ctx) {
  for (uint32_t i = 0; i < n->n_args; i++) arg_for_each_ref(&n->args[i], fn, ctx);
  for (uint32_t i = 0; i < n->n_kwargs; i++) arg_for_each_ref(&n->kwargs[i].value, fn, ctx);
  for (uint32_t i = 0; i < n->n_mutates; i++) fn(ctx, n->mutates[i]);
}

static void arg_remap(vl_arg *a, const uint32_t *map) {
  if (a->kind == VL_ARG_REF) a->u.ref = map[a->u.ref];
  if (a->kind == VL_ARG_LIST) {
    for (uint32_t i = 0; i < a->count; i++) arg_remap(&a->u.items[i], map);
  }
}

void vl__node_remap_refs(vl_node *n, const uint32_t *map) {
  for (uint32_t i = 0; i < n->n_args; i++) arg_remap(&n->args[i], map);
  for (uint32_t i = 0; i < n->n_kwargs; i++) arg_remap(&n->kwargs[i].value, map);
  for (uint32_t i = 0; i < n->n_mutates; i++) n->mutates[i] = map[n->mutates[i]];
  if (n->out != VL_NO_NODE) n->out = map[n->out];
  if (n->alias_of != VL_NO_NODE) n->alias_of = map[n->alias_of];
}

/* Users are built in two sweeps (count into cnt[], then fill); last[] makes each user count
 * once. The sweeps walk references directly (no callback); every node's list is a slice of one
 * pool per graph, kept while the new lists fit in it, so re-indexing after a pass allocates
 * little. */
typedef struct {
  vl_graph *g;
  uint32_t *last, *cnt;
  uint32_t user;
  bool fill;
} users_ctx;

static inline void users_visit(users_ctx *c, uint32_t ref) {
  if (c->last[ref] == c->user) return;
  c->last[ref] = c->user;
  if (c->fill) {
    vl_node *r = &c->g->nodes[ref];
    r->users[r->n_users++] = c->user;
  } else {
    c->cnt[ref]++;
  }
}

static void users_arg(users_ctx *c, const vl_arg *a) {
  if (a->kind == VL_ARG_REF) users_visit(c, a->u.ref);
  if (a->kind != VL_ARG_LIST) return;
  for (uint32_t i = 0; i < a->count; i++) {
    const vl_arg *item = &a->u.items[i];
    if (item->kind == VL_ARG_REF) {
      users_visit(c, item->u.ref);
    } else if (item->kind == VL_ARG_LIST) {
      users_arg(c, item);
    }
  }
}

static void users_sweep(users_ctx *c) {
  for (uint32_t i = 0; i < c->g->n_nodes; i++) c->last[i] = VL_NO_NODE;
  for (c->user = 0; c->user < c->g->n_nodes; c->user++) {
    const vl_node *n = &c->g->nodes[c->user];
    for (uint32_t i = 0; i < n->n_args; i++) users_arg(c, &n->args[i]);
    for (uint32_t i = 0; i < n->n_kwargs; i++) users_arg(c, &n->kwargs[i].value);
    for (uint32_t i = 0; i < n->n_mutates; i++) users_visit(c, n->mutates[i]);
  }
}

vl_status vl_graph_index_users(vl_graph *g) {
  size_t n = g->n_nodes ? g->n_nodes : 1, total = 0;
  users_ctx c = {g, malloc(n * sizeof(uint32_t)), calloc(n, sizeof(uint32_t)), 0, false};
  vl_status st = c.last != NULL && c.cnt != NULL ? VL_OK : VL_ERR_NOMEM;
  if (st == VL_OK) users_sweep(&c);
  for (uint32_t i = 0; st == VL_OK && i < g->n_nodes; i++) total += c.cnt[i];
  uint32_t *pool = st == VL_OK ? vl__store_users(g->store, total) : NULL;
  if (pool == NULL) st = VL_ERR_NOMEM;
  for (uint32_t i = 0; i < g->n_nodes; i++) {
    vl_node *nd = &g->nodes[i];
    nd->users = st == VL_OK && c.cnt[i] > 0 ? pool : NULL;
    if (st == VL_OK) pool += c.cnt[i];
    nd->n_users = 0;
  }
  if (st == VL_OK) {
    c.fill = true;
    users_sweep(&c);
  }
  free(c.last);
  free(c.cnt);
  return st;
}

const char *vl_target_operator(const char *target, char *buf, size_t n) {
  const char *start = strchr(target, '.');
  start = start ? start + 1 : target;
  const char *end = strchr(start, '.');
  size_t len = end ? (size_t)(end - start) : strlen(start);
  if (n == 0) return buf;
  if (len >= n) len = n - 1;
  memcpy(buf, start, len);
  buf[len] = '\0';
  return buf;
}

const vl_arg *vl_node_kwarg(const vl_node *n, const char *key) {
  for (uint32_t i = 0; i < n->n_kwargs; i++) {
    if (strcmp(n->kwargs[i].key, key) == 0) return &n->kwargs[i].value;
  }
  return NULL;
}

bool vl_node_getitem(const vl_node *n, uint32_t *producer, uint32_t *index) {
  if (!vl__target_is(n, VL__GETITEM) || n->n_args != 2 || n->args[0].kind != VL_ARG_REF ||
      n->args[1].kind != VL_ARG_INT || n->args[1].u.i < 0 || n->args[1].u.i > UINT32_MAX) {
    return false;
  }
  if (producer != NULL) *producer = n->args[0].u.ref;
  if (index != NULL) *index = (uint32_t)n->args[1].u.i;
  return true;
}

bool vl__target_is(const vl_node *n, const char *target) {
  return n->op == VL_NODE_CALL && n->target != NULL && strcmp(n->target, target) == 0;
}

bool vl__is_view_copy(const vl_node *n) {
  return vl__target_is(n, "aten.view_copy.default");
}
bool vl__is_memory_view(const vl_node *n) {
  return vl__target_is(n, "memory.view");
}

/* docs/format.md §2, "Writes": a call whose operator name (between the namespace and the overload)
 * ends in "_" writes arg 0 - "add_", "copy_", and also dunder names such as "__iand__": the rule is
 * the spelling alone, which errs on the side of keeping a copy for the few dunders that are not in
 * place ("__and__"). */
static bool writes_arg0(const vl_node *n) {
  if (n->op != VL_NODE_CALL || n->n_args == 0 || n->target == NULL) return false;
  const char *start = strchr(n->target, '.');
  start = start ? start + 1 : n->target;
  const char *end = strchr(start, '.');
  if (end == NULL) end = start + strlen(start);
  return end > start && end[-1] == '_';
}

bool vl__node_is_inplace(const vl_node *n) {
  return writes_arg0(n) && n->args[0].kind == VL_ARG_REF;
}

void vl__node_for_each_write(const vl_node *n, vl__ref_fn fn, void *ctx) {
  /* A node writing one argument twice (add_(x, out=x)) reports it twice: callers tolerate it. */
  if (writes_arg0(n)) arg_for_each_ref(&n->args[0], fn, ctx); /* a list: each tensor */
  if (n->out != VL_NO_NODE) fn(ctx, n->out);
  for (uint32_t i = 0; i < n->n_mutates; i++) fn(ctx, n->mutates[i]);
}

bool vl__node_writes(const vl_node *n) {
  return writes_arg0(n) || n->out != VL_NO_NODE || n->n_mutates > 0;
}

static vl_status node_clone(vl__store *st, const vl_node *s, vl_node *d) {
  *d = *s;
  d->args = NULL;
  d->kwargs = NULL;
  d->mutates = d->users = NULL;
  d->n_users = 0;
  if ((d->name = vl__store_str(st, s->name, strlen(s->name))) == NULL) return VL_ERR_NOMEM;
  if (s->target && (d->target = vl__store_intern(st, s->target, strlen(s->target))) == NULL) {
    return VL_ERR_NOMEM;
  }
  if ((d->val = vl__store_spec(st, s->val)) == NULL) return VL_ERR_NOMEM;
  if (s->n_args && (d->args = vl__store_alloc(st, s->n_args * sizeof *d->args)) == NULL) {
    return VL_ERR_NOMEM;
  }
  for (uint32_t i = 0; i < s->n_args; i++) {
    if (vl__arg_copy(st, &s->args[i], &d->args[i]) != VL_OK) return VL_ERR_NOMEM;
  }
  if (s->n_kwargs && (d->kwargs = vl__store_alloc(st, s->n_kwargs * sizeof *d->kwargs)) == NULL) {
    return VL_ERR_NOMEM;
  }
  for (uint32_t i = 0; i < s->n_kwargs; i++) {
    const vl_kwarg *k = &s->kwargs[i];
    if ((d->kwargs[i].key = vl__store_intern(st, k->key, strlen(k->key))) == NULL ||
        vl__arg_copy(st, &k->value, &d->kwargs[i].value) != VL_OK) {
      return VL_ERR_NOMEM;
    }
  }
  if (s->n_mutates) {
    if ((d->mutates = vl__store_alloc(st, s->n_mutates * sizeof *d->mutates)) == NULL) {
      return VL_ERR_NOMEM;
    }
    memcpy(d->mutates, s->mutates, s->n_mutates * sizeof *d->mutates);
  }
  if (s->n_vals) {
    vl_spec *vals = vl__store_alloc(st, s->n_vals * sizeof *vals);
    if (vals == NULL) return VL_ERR_NOMEM;
    memcpy(vals, s->vals, s->n_vals * sizeof *vals);
    d->vals = vals;
  }
  return VL_OK;
}

vl_status vl_graph_clone(const vl_graph *g, vl_graph **out, vl_error *err) {
  vl_graph *c = vl__graph_new();
  if (c == NULL) return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  vl__store *store = c->store;
  *c = *g;
  c->store = store;
  c->name = NULL;
  c->nodes = NULL;
  c->n_nodes = 0;
  vl_status st = VL_OK;
  if (g->name && (c->name = vl__store_str(store, g->name, strlen(g->name))) == NULL) {
    st = VL_ERR_NOMEM;
  }
  if (st == VL_OK && (c->nodes = calloc(g->n_nodes ? g->n_nodes : 1, sizeof *c->nodes)) == NULL) {
    st = VL_ERR_NOMEM;
  }
  for (; st == VL_OK && c->n_nodes < g->n_nodes; c->n_nodes++) {
    st = node_clone(store, &g->nodes[c->n_nodes], &c->nodes[c->n_nodes]);
  }
  if (st == VL_OK) st = vl_graph_index_users(c);
  if (st != VL_OK) {
    vl_graph_free(c);
    return vl_error_set(err, st, "", "out of memory cloning the graph");
  }
  *out = c;
  return VL_OK;
}
