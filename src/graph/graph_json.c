/* graph_json.c - graph JSON (SPEC §2): strict parsing and validation into vl_graph, and
 * printing back. Linear in the document: names are resolved through a hash table built in a
 * first sweep, so forward references and unknown names are told apart. Unknown keys are
 * rejected everywhere except inside kwargs. Every error carries a JSON pointer. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_internal.h"
#include "base/json_num.h"
#include "base/json_util.h"
#include "viewlower/tensor_json.h"

#define VL__MAX_KWARGS 256

typedef struct {
  uint32_t *slots; /* node index + 1; 0 is empty */
  uint32_t mask;
  const vl_graph *g;
} name_table;

typedef struct {
  vl_graph *g;
  name_table names;
  const vl_limits *lim;
  vl_error *err;
  char path[VL_ERROR_PATH_MAX]; /* "/nodes/<i>" of the node being parsed */
  uint32_t index;
  bool getitem; /* the node being parsed is an operator.getitem */
} parser;

static const char *const graph_keys[] = {"format",         "version", "name",
                                         "skip_dim_order", "nodes",   NULL};
static const char *const node_keys[] = {"name", "op",     "target",  "kind",     "mutated", "val",
                                        "args", "kwargs", "mutates", "alias_of", "vals", "offset", NULL};

static uint64_t hash_name(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static uint32_t *name_slot(name_table *t, const char *name) {
  uint32_t i = (uint32_t)hash_name(name) & t->mask;
  while (t->slots[i] != 0 && strcmp(t->g->nodes[t->slots[i] - 1].name, name) != 0)
    i = (i + 1) & t->mask;
  return &t->slots[i];
}

static uint32_t name_lookup(name_table *t, const char *name) {
  uint32_t s = *name_slot(t, name);
  return s ? s - 1 : VL_NO_NODE;
}

static vl_status fail(parser *p, vl_status code, const char *sub, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static vl_status fail(parser *p, vl_status code, const char *sub, const char *fmt, ...) {
  char path[VL_ERROR_PATH_MAX];
  char msg[VL_ERROR_MESSAGE_MAX];
  snprintf(path, sizeof path, "%.120s%.120s", p->path, sub);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return vl_error_set(p->err, code, path, "%s", msg);
}
#define FAIL(p, sub, ...) fail(p, VL_ERR_INVALID_GRAPH, sub, __VA_ARGS__)

/* A reference from the current node to name: it must name an earlier node. */
static vl_status resolve(parser *p, const char *name, const char *sub, uint32_t *out) {
  uint32_t idx = name_lookup(&p->names, name);
  if (idx == VL_NO_NODE) return FAIL(p, sub, "unknown node \"%.64s\"", name);
  if (idx >= p->index) {
    if (idx == p->index) return FAIL(p, sub, "node \"%.64s\" refers to itself", name);
    return FAIL(p, sub, "\"%.64s\" is defined later (nodes must be in execution order)", name);
  }
  /* SPEC §2: a node with several outputs is read only as args[0] of an operator.getitem. */
  if (p->g->nodes[idx].n_vals > 0 && !(p->getitem && strcmp(sub, "/args/0") == 0))
    return FAIL(p, sub,
                "\"%.64s\" has several outputs (vals): read one through operator.getitem", name);
  *out = idx;
  return VL_OK;
}

/* A number literal (SPEC §2 "Literals are exact"): from its token text when the tree came from
 * vl__json_parse_one (an integer token exactly in int64, a float token the nearest double);
 * a number built through the cJSON API has only its double: whole within +-2^53 is an int. */
static vl_status number_arg(parser *p, const cJSON *j, const char *sub, vl_arg *out) {
  if (j->valuestring == NULL) {
    bool whole = vl__json_int(j, INT64_MIN, INT64_MAX, &out->u.i);
    out->kind = whole ? VL_ARG_INT : VL_ARG_FLOAT;
    if (!whole) out->u.f = j->valuedouble;
    if (!whole && !isfinite(out->u.f)) return FAIL(p, sub, "a number must be finite");
    return VL_OK;
  }
  bool is_float = false;
  switch (vl__num_parse(j->valuestring, strlen(j->valuestring), &is_float, &out->u.i, &out->u.f)) {
  case VL__NUM_OK: out->kind = is_float ? VL_ARG_FLOAT : VL_ARG_INT; return VL_OK;
  case VL__NUM_RANGE:
    if (is_float)
      return FAIL(p, sub, "%.40s is beyond the range of a double (write {\"float\": \"inf\"} "
                          "for infinity)", j->valuestring);
    return FAIL(p, sub, "integer %.40s is outside the int64 range", j->valuestring);
  case VL__NUM_BAD: break;
  }
  return FAIL(p, sub, "is not a JSON number");
}

/* {"float": "inf" | "-inf" | "nan"}: a non-finite float literal (SPEC §2). */
static vl_status float_word_arg(parser *p, const cJSON *j, const char *sub, vl_arg *out) {
  static const struct {
    const char *word;
    double value;
  } words[] = {{"inf", INFINITY}, {"-inf", -INFINITY}, {"nan", NAN}};
  const cJSON *v = j->child;
  if (v != NULL && v->next == NULL && strcmp(v->string, "float") == 0 && cJSON_IsString(v)) {
    for (size_t k = 0; k < sizeof words / sizeof *words; k++) {
      if (strcmp(v->valuestring, words[k].word) == 0) {
        out->kind = VL_ARG_FLOAT;
        out->u.f = words[k].value;
        return VL_OK;
      }
    }
  }
  return FAIL(p, sub,
              "an object literal must be {\"float\": \"inf\"}, {\"float\": \"-inf\"} or "
              "{\"float\": \"nan\"}");
}

/* Converts a JSON value into an argument. In args (kwarg == NULL) strings are references; in
 * kwargs only "out" holds a reference. */
static vl_status parse_arg(parser *p, const cJSON *j, bool strings_are_refs, char *sub,
                           vl_arg *out) {
  memset(out, 0, sizeof *out);
  if (cJSON_IsNull(j)) return VL_OK;
  if (cJSON_IsBool(j)) {
    out->kind = VL_ARG_BOOL;
    out->u.b = cJSON_IsTrue(j);
    return VL_OK;
  }
  if (cJSON_IsNumber(j)) return number_arg(p, j, sub, out);
  if (cJSON_IsObject(j)) return float_word_arg(p, j, sub, out);
  if (cJSON_IsString(j)) {
    if (strings_are_refs) {
      out->kind = VL_ARG_REF;
      return resolve(p, j->valuestring, sub, &out->u.ref);
    }
    out->kind = VL_ARG_STRING;
    if (!vl__utf8_valid(j->valuestring, strlen(j->valuestring)))
      return FAIL(p, sub, "is not valid UTF-8");
    out->u.s = strdup(j->valuestring);
    return out->u.s ? VL_OK : VL_ERR_NOMEM;
  }
  uint32_t n = 0;
  for (const cJSON *c = j->child; c; c = c->next) n++;
  out->kind = VL_ARG_LIST;
  if (n == 0) return VL_OK;
  out->u.list.items = calloc(n, sizeof(vl_arg));
  if (out->u.list.items == NULL) return VL_ERR_NOMEM;
  size_t sublen = strlen(sub);
  for (const cJSON *c = j->child; c; c = c->next) {
    vl_pointer_append_index(sub, VL_ERROR_PATH_MAX, out->u.list.count);
    vl_status st = parse_arg(p, c, strings_are_refs, sub, &out->u.list.items[out->u.list.count]);
    sub[sublen] = '\0';
    out->u.list.count++;
    if (st != VL_OK) return st;
  }
  return VL_OK;
}

/* Does j nest arrays or objects deeper than budget levels? Recursion stays within budget. A
 * tree built with the cJSON API has no nesting limit, and every walk over arguments recurses. */
static bool nested_deeper(const cJSON *j, int budget) {
  if (!cJSON_IsArray(j) && !cJSON_IsObject(j)) return false;
  if (budget == 0) return true;
  for (const cJSON *c = j->child; c; c = c->next)
    if (nested_deeper(c, budget - 1)) return true;
  return false;
}

/* parse_arg for one top-level argument or kwarg value, its nesting bounded first. */
static vl_status parse_top_arg(parser *p, const cJSON *j, bool strings_are_refs, char *sub,
                               vl_arg *out) {
  memset(out, 0, sizeof *out);
  if (nested_deeper(j, CJSON_NESTING_LIMIT))
    return fail(p, VL_ERR_TOO_LARGE, sub, "nested deeper than %d levels", CJSON_NESTING_LIMIT);
  return parse_arg(p, j, strings_are_refs, sub, out);
}

static vl_status parse_args(parser *p, vl_node *n, const cJSON *args) {
  if (args == NULL) return VL_OK;
  if (!cJSON_IsArray(args)) return FAIL(p, "/args", "must be an array");
  uint32_t count = 0;
  for (const cJSON *c = args->child; c; c = c->next) count++;
  if (count == 0) return VL_OK;
  if ((n->args = calloc(count, sizeof *n->args)) == NULL) return VL_ERR_NOMEM;
  char sub[VL_ERROR_PATH_MAX];
  for (const cJSON *c = args->child; c; c = c->next) {
    snprintf(sub, sizeof sub, "/args/%u", n->n_args);
    vl_status st = parse_top_arg(p, c, true, sub, &n->args[n->n_args]);
    n->n_args++;
    if (st != VL_OK) return st;
  }
  return VL_OK;
}

static vl_status parse_kwargs(parser *p, vl_node *n, const cJSON *kw) {
  if (kw == NULL) return VL_OK;
  if (!cJSON_IsObject(kw)) return FAIL(p, "/kwargs", "must be an object");
  /* Every key is allowed in kwargs; duplicates are refused below. */
  vl_status st;
  uint32_t count = 0;
  for (const cJSON *c = kw->child; c; c = c->next) count++;
  if (count == 0) return VL_OK;
  /* Duplicates are found by a quadratic scan, so the key count is bounded. */
  if (count > VL__MAX_KWARGS)
    return fail(p, VL_ERR_TOO_LARGE, "/kwargs", "more than %d keyword arguments", VL__MAX_KWARGS);
  if ((n->kwargs = calloc(count, sizeof *n->kwargs)) == NULL) return VL_ERR_NOMEM;
  char sub[VL_ERROR_PATH_MAX];
  for (const cJSON *c = kw->child; c; c = c->next) {
    vl__path_join(sub, "/kwargs", c->string);
    for (uint32_t i = 0; i < n->n_kwargs; i++)
      if (strcmp(n->kwargs[i].key, c->string) == 0)
        return FAIL(p, sub, "duplicate key \"%.64s\"", c->string);
    if (!vl__utf8_valid(c->string, strlen(c->string)))
      return FAIL(p, sub, "key is not valid UTF-8");
    vl_kwarg *k = &n->kwargs[n->n_kwargs++];
    if ((k->key = strdup(c->string)) == NULL) return VL_ERR_NOMEM;
    bool is_out = strcmp(c->string, "out") == 0;
    if (is_out && !cJSON_IsString(c)) return FAIL(p, sub, "must name the destination node");
    st = parse_top_arg(p, c, false, sub, &k->value);
    if (st != VL_OK) return st;
    if (is_out) {
      free(k->value.u.s);
      k->value.kind = VL_ARG_REF;
      st = resolve(p, c->valuestring, sub, &k->value.u.ref);
      if (st != VL_OK) return st;
      n->out = k->value.u.ref;
    }
  }
  return VL_OK;
}

static bool args_mention(const vl_arg *a, uint32_t ref) {
  if (a->kind == VL_ARG_REF) return a->u.ref == ref;
  if (a->kind != VL_ARG_LIST) return false;
  for (uint32_t i = 0; i < a->u.list.count; i++)
    if (args_mention(&a->u.list.items[i], ref)) return true;
  return false;
}

static vl_status parse_mutates(parser *p, vl_node *n, const cJSON *m) {
  if (m == NULL) return VL_OK;
  if (!cJSON_IsArray(m)) return FAIL(p, "/mutates", "must be an array of node names");
  uint32_t count = 0;
  for (const cJSON *c = m->child; c; c = c->next) count++;
  if (count == 0) return VL_OK;
  /* Each entry is looked up among the arguments, so the count is bounded like kwargs. */
  if (count > VL__MAX_KWARGS)
    return fail(p, VL_ERR_TOO_LARGE, "/mutates", "more than %d mutated arguments", VL__MAX_KWARGS);
  if ((n->mutates = malloc(count * sizeof *n->mutates)) == NULL) return VL_ERR_NOMEM;
  char sub[VL_ERROR_PATH_MAX];
  for (const cJSON *c = m->child; c; c = c->next) {
    snprintf(sub, sizeof sub, "/mutates/%u", n->n_mutates);
    if (!cJSON_IsString(c)) return FAIL(p, sub, "must be a node name");
    uint32_t ref;
    vl_status st = resolve(p, c->valuestring, sub, &ref);
    if (st != VL_OK) return st;
    bool among = false;
    for (uint32_t i = 0; i < n->n_args && !among; i++) among = args_mention(&n->args[i], ref);
    if (!among) return FAIL(p, sub, "\"%.64s\" is not among the node's arguments", c->valuestring);
    n->mutates[n->n_mutates++] = ref;
  }
  return VL_OK;
}

static vl_status parse_val(parser *p, vl_node *n, const cJSON *val) {
  if (val == NULL)
    return FAIL(p, "/val", "is required on placeholder and call_function nodes (or vals, on a "
                           "call with several outputs)");
  vl_error e;
  vl_error_clear(&e);
  if (vl_spec_from_json(val, NULL, &n->val, &e) != VL_OK) {
    char sub[VL_ERROR_PATH_MAX];
    snprintf(sub, sizeof sub, "/val%.200s", e.path);
    return FAIL(p, sub, "%s", e.message);
  }
  n->has_val = true;
  return VL_OK;
}

/* "vals" of a node with several outputs: a non-empty array of specs. */
static vl_status parse_vals(parser *p, vl_node *n, const cJSON *vals) {
  if (!cJSON_IsArray(vals)) return FAIL(p, "/vals", "must be an array of tensor specs");
  uint32_t count = 0;
  for (const cJSON *c = vals->child; c; c = c->next) count++;
  if (count == 0) return FAIL(p, "/vals", "must list at least one output");
  if (count > VL__MAX_KWARGS)
    return fail(p, VL_ERR_TOO_LARGE, "/vals", "more than %d outputs", VL__MAX_KWARGS);
  if ((n->vals = calloc(count, sizeof *n->vals)) == NULL) return VL_ERR_NOMEM;
  for (const cJSON *c = vals->child; c; c = c->next) {
    vl_error e;
    vl_error_clear(&e);
    if (vl_spec_from_json(c, NULL, &n->vals[n->n_vals], &e) != VL_OK) {
      char sub[VL_ERROR_PATH_MAX];
      snprintf(sub, sizeof sub, "/vals/%u%.200s", n->n_vals, e.path);
      return FAIL(p, sub, "%s", e.message);
    }
    n->n_vals++;
  }
  return VL_OK;
}

/* An operator.getitem: args [producer, i] with producer a node with vals, i an output index,
 * no kwargs or mutates, and its own val equal to vals[i]. */
static vl_status check_getitem(parser *p, const vl_node *n) {
  if (n->n_vals > 0) return FAIL(p, "/vals", "an operator.getitem has one val, not vals");
  if (n->n_args != 2) return FAIL(p, "/args", "operator.getitem takes [node, index]");
  if (n->args[0].kind != VL_ARG_REF) return FAIL(p, "/args/0", "must name a node");
  const vl_node *src = &p->g->nodes[n->args[0].u.ref];
  if (src->n_vals == 0)
    return FAIL(p, "/args/0",
                "\"%.64s\" has a single output (val): operator.getitem reads a node with vals",
                src->name);
  if (n->args[1].kind != VL_ARG_INT) return FAIL(p, "/args/1", "the index must be an integer");
  if (n->args[1].u.i < 0 || n->args[1].u.i >= src->n_vals)
    return FAIL(p, "/args/1", "index %lld is out of range: \"%.64s\" has %u outputs",
                (long long)n->args[1].u.i, src->name, src->n_vals);
  if (n->n_kwargs > 0) return FAIL(p, "/kwargs", "operator.getitem takes no kwargs");
  if (n->n_mutates > 0) return FAIL(p, "/mutates", "operator.getitem writes nothing");
  if (!vl_spec_equal(&n->val, &src->vals[n->args[1].u.i]))
    return FAIL(p, "/val", "disagrees with /vals/%lld of \"%.64s\"", (long long)n->args[1].u.i,
                src->name);
  return VL_OK;
}

static vl_status parse_placeholder(parser *p, vl_node *n, const cJSON *j) {
  static const char *const kinds[] = {"user_input", "parameter", "buffer", "constant"};
  const cJSON *kind = cJSON_GetObjectItemCaseSensitive(j, "kind");
  const cJSON *mut = cJSON_GetObjectItemCaseSensitive(j, "mutated");
  static const char *const forbidden[] = {"target", "args",     "kwargs",
                                          "mutates", "alias_of", "vals", "offset"};
  for (size_t i = 0; i < sizeof forbidden / sizeof *forbidden; i++) {
    if (cJSON_GetObjectItemCaseSensitive(j, forbidden[i]) != NULL) {
      char sub[64];
      snprintf(sub, sizeof sub, "/%s", forbidden[i]);
      return FAIL(p, sub, "a placeholder has no %s", forbidden[i]);
    }
  }
  if (kind != NULL) {
    bool found = false;
    for (int k = 0; k < 4 && !found && cJSON_IsString(kind); k++)
      if (strcmp(kind->valuestring, kinds[k]) == 0) {
        n->kind = (vl_input_kind)k;
        found = true;
      }
    if (!found) return FAIL(p, "/kind", "must be user_input, parameter, buffer or constant");
  }
  if (mut != NULL && !cJSON_IsBool(mut)) return FAIL(p, "/mutated", "must be true or false");
  n->mutated = cJSON_IsTrue(mut);
  return parse_val(p, n, cJSON_GetObjectItemCaseSensitive(j, "val"));
}

static bool target_well_formed(const char *t) {
  /* namespace.operator[.overload]: two or three non-empty dot-separated parts. */
  int parts = 1;
  size_t run = 0;
  for (const char *c = t; *c; c++) {
    if (*c == '.') {
      if (run == 0) return false;
      parts++;
      run = 0;
    } else {
      run++;
    }
  }
  return run > 0 && (parts == 2 || parts == 3);
}

static vl_status parse_call(parser *p, vl_node *n, const cJSON *j) {
  const cJSON *target = cJSON_GetObjectItemCaseSensitive(j, "target");
  if (cJSON_GetObjectItemCaseSensitive(j, "kind") || cJSON_GetObjectItemCaseSensitive(j, "mutated"))
    return FAIL(p, "", "kind and mutated belong to placeholders only");
  if (!cJSON_IsString(target) || !target_well_formed(target->valuestring))
    return FAIL(p, "/target", "must be a string namespace.operator[.overload]");
  if (!vl__utf8_valid(target->valuestring, strlen(target->valuestring)))
    return FAIL(p, "/target", "is not valid UTF-8");
  if ((n->target = strdup(target->valuestring)) == NULL) return VL_ERR_NOMEM;
  p->getitem = strcmp(n->target, VL__GETITEM) == 0;
  const cJSON *val = cJSON_GetObjectItemCaseSensitive(j, "val");
  const cJSON *vals = cJSON_GetObjectItemCaseSensitive(j, "vals");
  vl_status st = parse_args(p, n, cJSON_GetObjectItemCaseSensitive(j, "args"));
  if (st == VL_OK) st = parse_kwargs(p, n, cJSON_GetObjectItemCaseSensitive(j, "kwargs"));
  if (st == VL_OK) st = parse_mutates(p, n, cJSON_GetObjectItemCaseSensitive(j, "mutates"));
  if (st == VL_OK && val != NULL && vals != NULL)
    return FAIL(p, "/vals", "give either val or vals, not both");
  if (st == VL_OK) st = vals != NULL ? parse_vals(p, n, vals) : parse_val(p, n, val);
  if (st == VL_OK && p->getitem) st = check_getitem(p, n);
  const cJSON *alias = cJSON_GetObjectItemCaseSensitive(j, "alias_of");
  if (st == VL_OK && alias != NULL) {
    if (!vl__is_memory_view(n))
      return FAIL(p, "/alias_of", "only memory.view nodes carry alias_of");
    if (!cJSON_IsString(alias)) return FAIL(p, "/alias_of", "must be a node name");
    st = resolve(p, alias->valuestring, "/alias_of", &n->alias_of);
  }
  const cJSON *offset = cJSON_GetObjectItemCaseSensitive(j, "offset");
  if (st == VL_OK && offset != NULL) {
    if (!vl__is_memory_view(n)) return FAIL(p, "/offset", "only memory.view nodes carry offset");
    if (!vl__json_int(offset, 0, INT64_MAX, &n->offset))
      return FAIL(p, "/offset", "must be a whole number of elements >= 0");
  }
  return st;
}

static vl_status parse_output(parser *p, vl_node *n, const cJSON *j) {
  if (p->index + 1 != p->g->n_nodes) return FAIL(p, "/op", "the output node must be the last node");
  for (const cJSON *c = j->child; c; c = c->next)
    if (strcmp(c->string, "name") != 0 && strcmp(c->string, "op") != 0 &&
        strcmp(c->string, "args") != 0)
      return FAIL(p, "", "an output node has only name, op and args (found \"%.64s\")", c->string);
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(j, "args");
  if (!cJSON_IsArray(args)) return FAIL(p, "/args", "must be a flat list of node names");
  char sub[VL_ERROR_PATH_MAX];
  uint32_t i = 0;
  for (const cJSON *c = args->child; c; c = c->next, i++) {
    snprintf(sub, sizeof sub, "/args/%u", i);
    if (!cJSON_IsString(c)) return FAIL(p, sub, "must be a node name");
  }
  vl_status st = parse_args(p, n, args);
  for (uint32_t k = 0; st == VL_OK && k < n->n_args; k++) {
    if (!p->g->nodes[n->args[k].u.ref].has_val) {
      snprintf(sub, sizeof sub, "/args/%u", k);
      return FAIL(p, sub, "an output must be a tensor node");
    }
  }
  p->g->output = p->index;
  return st;
}

static vl_status parse_node(parser *p, const cJSON *j) {
  vl_node *n = &p->g->nodes[p->index];
  const cJSON *op = cJSON_GetObjectItemCaseSensitive(j, "op");
  vl_status st = vl__json_check_keys(j, node_keys, NULL, p->path, VL_ERR_INVALID_GRAPH, p->err);
  if (st != VL_OK) return st;
  n->out = n->alias_of = VL_NO_NODE;
  p->getitem = false;
  if (!cJSON_IsString(op))
    return FAIL(p, "/op", "is required: placeholder, call_function or output");
  if (strcmp(op->valuestring, "placeholder") == 0) {
    n->op = VL_NODE_PLACEHOLDER;
    st = parse_placeholder(p, n, j);
  } else if (strcmp(op->valuestring, "call_function") == 0) {
    n->op = VL_NODE_CALL;
    st = parse_call(p, n, j);
  } else if (strcmp(op->valuestring, "output") == 0) {
    n->op = VL_NODE_OUTPUT;
    st = parse_output(p, n, j);
  } else {
    return FAIL(p, "/op", "must be placeholder, call_function or output, not \"%.32s\"",
                op->valuestring);
  }
  if (st == VL_ERR_NOMEM) return vl_error_set(p->err, st, "", "out of memory");
  return st;
}

/* First sweep: names (unique, valid), so the second sweep can resolve references. */
static vl_status collect_names(parser *p, const cJSON *nodes) {
  uint32_t i = 0;
  for (const cJSON *j = nodes->child; j; j = j->next, i++) {
    snprintf(p->path, sizeof p->path, "/nodes/%u", i);
    if (!cJSON_IsObject(j)) return FAIL(p, "", "a node must be an object");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    if (!cJSON_IsString(name) || name->valuestring[0] == '\0')
      return FAIL(p, "/name", "is required and must be a non-empty string");
    size_t len = strlen(name->valuestring);
    if (len > p->lim->max_name_len)
      return fail(p, VL_ERR_TOO_LARGE, "/name", "name is longer than %lld bytes",
                  (long long)p->lim->max_name_len);
    if (!vl__utf8_valid(name->valuestring, len)) return FAIL(p, "/name", "is not valid UTF-8");
    uint32_t *slot = name_slot(&p->names, name->valuestring);
    if (*slot != 0)
      return FAIL(p, "/name", "duplicate name \"%.64s\" (first used by /nodes/%lld)",
                  name->valuestring, (long long)(*slot - 1));
    if ((p->g->nodes[i].name = strdup(name->valuestring)) == NULL)
      return vl_error_set(p->err, VL_ERR_NOMEM, "", "out of memory");
    p->g->n_nodes = i + 1; /* names are owned from here on */
    *slot = i + 1;
  }
  return VL_OK;
}

static vl_status parse_header(parser *p, const cJSON *root, const cJSON **nodes, uint32_t *count) {
  p->path[0] = '\0';
  if (!cJSON_IsObject(root)) return FAIL(p, "", "a graph must be a JSON object");
  vl_status st = vl__json_check_keys(root, graph_keys, NULL, "", VL_ERR_INVALID_GRAPH, p->err);
  if (st != VL_OK) return st;
  const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
  const cJSON *version = cJSON_GetObjectItemCaseSensitive(root, "version");
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
  const cJSON *skip = cJSON_GetObjectItemCaseSensitive(root, "skip_dim_order");
  int64_t v;
  if (!cJSON_IsString(format) || strcmp(format->valuestring, "viewlower.graph") != 0)
    return FAIL(p, "/format", "unknown format (expected \"viewlower.graph\")");
  if (!vl__json_int(version, 1, 1, &v))
    return FAIL(p, "/version", "unsupported version (expected 1)");
  if (name != NULL && !cJSON_IsString(name)) return FAIL(p, "/name", "must be a string");
  if (name != NULL && !vl__utf8_valid(name->valuestring, strlen(name->valuestring)))
    return FAIL(p, "/name", "is not valid UTF-8");
  if (name != NULL && (p->g->name = strdup(name->valuestring)) == NULL) return VL_ERR_NOMEM;
  if (skip != NULL && !cJSON_IsBool(skip))
    return FAIL(p, "/skip_dim_order", "must be true or false");
  p->g->skip_dim_order = cJSON_IsTrue(skip);
  *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
  if (!cJSON_IsArray(*nodes)) return FAIL(p, "/nodes", "is required and must be an array");
  uint32_t n = 0;
  for (const cJSON *c = (*nodes)->child; c; c = c->next) {
    if (n >= p->lim->max_nodes)
      return fail(p, VL_ERR_TOO_LARGE, "/nodes", "the graph has more than %lld nodes",
                  (long long)p->lim->max_nodes);
    n++;
  }
  if (n == 0) return FAIL(p, "/nodes", "a graph needs at least its output node");
  *count = n;
  return VL_OK;
}

/* Builds the graph; check adds the semantic validation of graph_check.c. */
static vl_status graph_from_json(const cJSON *root, const vl_limits *lim, bool check,
                                 vl_graph **out, vl_error *err) {
  vl_limits dflt;
  if (lim == NULL) {
    vl_limits_default(&dflt);
    lim = &dflt;
  }
  parser p = {.lim = lim, .err = err};
  p.g = calloc(1, sizeof *p.g);
  if (p.g == NULL) return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  const cJSON *nodes = NULL;
  uint32_t count = 0;
  vl_status st = parse_header(&p, root, &nodes, &count);
  uint32_t cap = 16;
  while (st == VL_OK && cap < 2 * count) cap *= 2;
  if (st == VL_OK) {
    p.g->nodes = calloc(count, sizeof *p.g->nodes);
    p.names.slots = calloc(cap, sizeof *p.names.slots);
    p.names.mask = cap - 1;
    p.names.g = p.g;
    if (p.g->nodes == NULL || p.names.slots == NULL)
      st = vl_error_set(err, VL_ERR_NOMEM, "", "out of memory for %u nodes", count);
  }
  if (st == VL_OK) st = collect_names(&p, nodes);
  p.g->output = VL_NO_NODE;
  p.index = 0;
  for (const cJSON *j = nodes ? nodes->child : NULL; st == VL_OK && j; j = j->next, p.index++) {
    snprintf(p.path, sizeof p.path, "/nodes/%u", p.index);
    st = parse_node(&p, j);
  }
  if (st == VL_OK && p.g->output == VL_NO_NODE) {
    snprintf(p.path, sizeof p.path, "/nodes/%u", count - 1);
    st = FAIL(&p, "/op", "the last node must be the output node");
  }
  if (st == VL_OK) st = vl_graph_index_users(p.g);
  if (st == VL_ERR_NOMEM) vl_error_set(err, st, "", "out of memory");
  if (st == VL_OK && check) st = vl__graph_check(p.g, err);
  free(p.names.slots);
  if (st != VL_OK) {
    vl_graph_free(p.g);
    return st;
  }
  *out = p.g;
  return VL_OK;
}

vl_status vl_graph_from_json(const cJSON *root, const vl_limits *lim, vl_graph **out,
                             vl_error *err) {
  return graph_from_json(root, lim, true, out, err);
}

static vl_status parse_text(const char *json, size_t len, const vl_limits *lim, bool check,
                            vl_graph **out, vl_error *err) {
  cJSON *root = NULL;
  size_t at = 0;
  switch (vl__json_parse_one(json, len, true, &root, &at)) {
  case VL__JSON_NUL_ESCAPE:
    return vl_error_set(err, VL_ERR_PARSE, "",
                        "\\u0000 at byte %zu: strings cannot hold NUL characters", at);
  case VL__JSON_MALFORMED:
    return vl_error_set(err, VL_ERR_PARSE, "",
                        "malformed JSON at byte %zu (or nested deeper than %d levels)", at,
                        CJSON_NESTING_LIMIT);
  case VL__JSON_CONTROL:
    return vl_error_set(err, VL_ERR_PARSE, "",
                        "malformed JSON at byte %zu: control character 0x%02x", at,
                        (unsigned)(unsigned char)json[at]);
  case VL__JSON_TRAILING:
    return vl_error_set(err, VL_ERR_PARSE, "", "trailing data after the JSON document at byte %zu",
                        at);
  case VL__JSON_NOMEM: return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  case VL__JSON_OK: break;
  }
  vl_status st = graph_from_json(root, lim, check, out, err);
  cJSON_Delete(root);
  return st;
}

vl_status vl_graph_parse(const char *json, size_t len, const vl_limits *lim, vl_graph **out,
                         vl_error *err) {
  return parse_text(json, len, lim, true, out, err);
}

vl_status vl_graph_parse_unvalidated(const char *json, size_t len, const vl_limits *lim,
                                     vl_graph **out, vl_error *err) {
  return parse_text(json, len, lim, false, out, err);
}
