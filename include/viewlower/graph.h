/* graph.h - the in-memory graph (docs/format.md §2) and its JSON form.
 *
 * Nodes are in execution order; every reference is a node index smaller than the referrer's.
 * The graph owns everything reachable from it; free it with vl_graph_free. Strings, argument
 * arrays and specs live in the graph's own store (one arena per graph, docs/architecture.md):
 * never free or realloc them. Equal targets, keys and specs are shared (interned), so they are
 * read-only; a node's val points at an interned spec.
 *
 * Nodes with several tensor outputs (docs/format.md §2, "Several outputs"): such a node has
 * n_vals > 0 and vals[0..n_vals) (and has_val false). Only operator.getitem nodes reference it,
 * always as args[0], with args[1] an integer output index i in [0, n_vals) and their own val equal
 * to vals[i]; the parser guarantees this, so vl_node_getitem can be trusted on any parsed graph. A
 * getitem node *is* output i of its producer: it owns that storage (see src/graph/alias.h). */
#ifndef VIEWLOWER_GRAPH_H
#define VIEWLOWER_GRAPH_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

#include "viewlower/buf.h"
#include "viewlower/export.h"
#include "viewlower/status.h"
#include "viewlower/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { VL_NODE_PLACEHOLDER, VL_NODE_CALL, VL_NODE_OUTPUT } vl_node_op;

typedef enum {
  VL_INPUT_USER,
  VL_INPUT_PARAMETER,
  VL_INPUT_BUFFER,
  VL_INPUT_CONSTANT
} vl_input_kind;

typedef enum {
  VL_ARG_NULL,
  VL_ARG_BOOL,
  VL_ARG_INT,    /* a JSON integer token (no '.', no exponent), exact in int64 */
  VL_ARG_FLOAT,  /* a float token (with '.' or exponent), or {"float": "inf"|"-inf"|"nan"} */
  VL_ARG_STRING, /* only in kwargs (a string in args is a reference) */
  VL_ARG_REF,    /* node index */
  VL_ARG_LIST
} vl_arg_kind;

typedef struct vl_arg {
  vl_arg_kind kind;
  uint32_t count; /* VL_ARG_LIST: the number of items, else 0 */
  union {
    bool b;
    int64_t i;
    double f;
    const char *s; /* in the graph's store */
    uint32_t ref;
    struct vl_arg *items; /* VL_ARG_LIST: count items (in the graph's store) */
  } u;
} vl_arg;

typedef struct vl_kwarg {
  const char *key; /* interned in the graph's store */
  vl_arg value; /* kwargs.out is a VL_ARG_REF; other strings are VL_ARG_STRING */
} vl_kwarg;

#define VL_NO_NODE UINT32_MAX

/* Memory plan bounds (docs/format.md §9): the largest alignment (1 GiB) and arena or offset
 * (2^53). */
#define VL_PLAN_MAX_ALIGNMENT (1 << 30)
#define VL_PLAN_MAX_BYTES (INT64_C(1) << 53)

typedef struct vl_node {
  const char *name;   /* in the graph's store */
  const char *target; /* call_function only, else NULL; interned (equal targets share one) */
  /* The node's spec, interned and read-only (nodes with equal specs share one): set when
   * has_val (placeholders, single-output calls, getitems), else an all-zero spec. */
  const vl_spec *val;
  const vl_spec *vals; /* multi-output call ("vals"): n_vals >= 1 output specs, else NULL */
  vl_arg *args;
  vl_kwarg *kwargs;
  uint32_t *mutates; /* node indices listed in "mutates" */
  /* Derived: nodes that reference this one (args at any depth, kwargs.out, mutates, output),
   * each user once, in graph order (a slice of one pool per graph). */
  uint32_t *users;
  int64_t offset; /* memory.view: element offset into args[0]'s buffer (format.md §3), else 0 */
  /* The memory plan (docs/format.md §9): a planned storage owner's byte offset in the arena. */
  int64_t mem_offset;
  uint32_t n_vals;
  uint32_t n_args;
  uint32_t n_kwargs;
  uint32_t n_mutates;
  uint32_t n_users;
  uint32_t out;      /* node named by kwargs.out, or VL_NO_NODE */
  uint32_t alias_of; /* memory.view: the storage owner, or VL_NO_NODE */
  vl_node_op op;
  vl_input_kind kind; /* placeholder only */
  bool mutated;       /* placeholder marked "mutated" */
  bool has_val;       /* val is set: placeholders, single-output calls, getitems */
  bool has_mem_offset;
} vl_node;

struct vl__store; /* private: the arena, the interned strings and specs, the users pool */

typedef struct vl_graph {
  const char *name; /* may be NULL; in the store */
  bool skip_dim_order;
  vl_node *nodes;
  uint32_t n_nodes;
  uint32_t output; /* index of the output node (always the last) */
  /* The memory plan (docs/format.md §9): "plan": {"arena_bytes", "alignment"}; every planned owner
   * has a mem_offset. Parsing checks the plan's invariant. */
  bool has_plan;
  int64_t plan_arena_bytes;
  int64_t plan_alignment;
  struct vl__store *store;
} vl_graph;

/* Parses and validates graph JSON. Error paths are JSON pointers into the document. */
VL_API vl_status vl_graph_parse(const char *json, size_t len, const vl_limits *lim, vl_graph **out,
                                vl_error *err);
/* Parsing alone: the JSON, its fields, names and references, without the validation that
 * vl_graph_parse runs after (skip_dim_order spelling, view sizes against val and base). For
 * tools that only reprint a graph, such as the benchmark's parse + print baseline. */
VL_API vl_status vl_graph_parse_unvalidated(const char *json, size_t len, const vl_limits *lim,
                                            vl_graph **out, vl_error *err);
/* Same from an already parsed document (e.g. params.graph of a request); root is not retained. */
VL_API vl_status vl_graph_from_json(const cJSON *root, const vl_limits *lim, vl_graph **out,
                                    vl_error *err);
/* The graph as JSON text (docs/format.md §2, as validate returns it in docs/protocol.md, "Methods":
 * every val with dtype, shape, dim_order, and dynamic when true; literals exactly as parsed),
 * appended to out without a tree. VL_ERR_NOMEM leaves out as it was. */
VL_API vl_status vl_graph_write(const vl_graph *g, vl_buf *out);
/* The same text, NUL-terminated; caller frees with free(). NULL on out-of-memory. */
VL_API char *vl_graph_print(const vl_graph *g);
/* The same text as a cJSON raw node, to embed in a response (cJSON prints it verbatim; the
 * tree cannot be walked). Caller frees with cJSON_Delete; NULL on out-of-memory. */
VL_API cJSON *vl_graph_to_json(const vl_graph *g);
VL_API void vl_graph_free(vl_graph *g);
/* A deep copy; caller frees with vl_graph_free. */
VL_API vl_status vl_graph_clone(const vl_graph *g, vl_graph **out, vl_error *err);

/* Rebuilds every node's users list (after passes rewrite references). */
VL_API vl_status vl_graph_index_users(vl_graph *g);

/* The operator name of a target ("aten.add_.Tensor" -> "add_"), written into buf. */
VL_API const char *vl_target_operator(const char *target, char *buf, size_t n);
/* The kwarg named key, or NULL. */
VL_API const vl_arg *vl_node_kwarg(const vl_node *n, const char *key);
/* Is n an operator.getitem? Then *producer (a node with vals) and *index (< its n_vals) are
 * set from its args. Either pointer may be NULL. */
VL_API bool vl_node_getitem(const vl_node *n, uint32_t *producer, uint32_t *index);

#ifdef __cplusplus
}
#endif
#endif
