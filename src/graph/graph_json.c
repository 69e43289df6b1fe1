/* graph_json.c - graph JSON (docs/format.md §2): strict parsing and validation into vl_graph.
 *
 * One pass over the text, no document tree: the reader (base/json_read.h) walks the outer
 * object and the nodes array itself and reads one node at a time onto a reused tape, so memory
 * is the graph plus one node. Names go into a hash table (under the store's random key, so no
 * input can choose names that collide) as nodes arrive; a reference must name an earlier node.
 * Literals are exact (numbers from their token text, base/json_num.h).
 *
 * Errors: the first problem in document order wins, except that malformed JSON anywhere wins
 * over every graph error (after a graph error the rest is still read, for syntax only). A
 * reference to a name not seen yet is told "defined later" or "unknown" from the rest of the
 * nodes. Unknown keys are rejected everywhere except inside kwargs. Every error carries a JSON
 * pointer. Linear in the document. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_num.h"
#include "base/json_read.h"
#include "base/json_util.h"
#include "base/json_write.h"
#include "graph/graph_internal.h"
#include "graph/spec_json.h"
#include "layout/tensor_internal.h"
#include "viewlower/tensor_json.h"

#define VL__MAX_KWARGS 256
#define NO_ENTRY VL__JT_NONE
/* Levels above an argument: document, nodes, node, args/kwargs, and an arg's own list. */
#define TREE_DEPTH_SLACK 5

/* Open addressing, at most half full; a slot keeps the name's hash and text beside its node
 * index, so a probe touches one slot and, on a hash match, the name. */
typedef struct {
  uint32_t node; /* node index + 1; 0 is empty */
  uint32_t hash;
  const char *name;
} name_slot_t;

typedef struct {
  name_slot_t *slots;
  uint32_t mask, count;
} name_table;

/* A reference to a name no earlier node has: told apart once the rest has been read. */
typedef struct {
  bool set, later;
  char sub[VL_ERROR_PATH_MAX];
  char path[VL_ERROR_PATH_MAX];
  char *name;
} pending_ref;

typedef struct {
  vl_graph *g;
  uint32_t cap;
  name_table names;
  const vl_limits *lim;
  vl_error *err;
  vl__jr r;
  char path[VL_ERROR_PATH_MAX]; /* "/nodes/<i>" of the node being parsed */
  uint32_t index;
  bool getitem; /* the node being parsed is an operator.getitem */
  bool at_node; /* p->path is "/nodes/<index>", not yet written */
  vl_status failed; /* the first graph error; the rest is read for syntax only */
  pending_ref pending;
  bool seen_format, seen_version, seen_nodes;
  uint32_t *mark; /* mark[ref] == index + 1: node index's arguments reference ref (mutates) */
  uint32_t mark_len;
} parser;

static const char *const graph_keys[] = {"format", "version", "name", "skip_dim_order",
                                         "nodes",  "plan",    NULL};

/* Node and spec keys, in the order of their field enums; a node's or spec's members are
 * sorted into a field array once (read_keys), so fields are found without a key search. */
typedef struct {
  const char *s;
  size_t n;
} key_name;
#define KEY(s) {s, sizeof(s) - 1}

enum { K_NAME, K_OP, K_TARGET, K_KIND, K_MUTATED, K_VAL, K_ARGS, K_KWARGS, K_MUTATES, K_ALIAS_OF,
       K_VALS, K_OFFSET, K_MEM_OFFSET, K_NODE_COUNT };
static const key_name node_keys[K_NODE_COUNT] = {
    KEY("name"),    KEY("op"),       KEY("target"), KEY("kind"),  KEY("mutated"),
    KEY("val"),     KEY("args"),     KEY("kwargs"), KEY("mutates"), KEY("alias_of"),
    KEY("vals"),    KEY("offset"),   KEY("mem_offset")};

/* In the order of the VL__SPEC_* members (graph/spec_json.h), whose reader applies the rules. */
static const key_name spec_keys[VL__SPEC_MEMBERS] = {KEY("dtype"), KEY("shape"),
                                                     KEY("dim_order"), KEY("strides"),
                                                     KEY("dynamic")};

/* ---- errors and paths ---- */

static vl_status fail(parser *p, vl_status code, const char *sub, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void node_path(parser *p, uint32_t i);

static vl_status fail(parser *p, vl_status code, const char *sub, const char *fmt, ...) {
  char path[VL_ERROR_PATH_MAX];
  if (p->at_node) node_path(p, p->index);
  char msg[VL_ERROR_MESSAGE_MAX];
  snprintf(path, sizeof path, "%.120s%.120s", p->path, sub);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return vl_error_set(p->err, code, path, "%s", msg);
}
#define FAIL(p, sub, ...) fail(p, VL_ERR_INVALID_GRAPH, sub, __VA_ARGS__)

/* "/nodes/<i>" into p->path (built only when an error needs it). */
static void node_path(parser *p, uint32_t i) {
  memcpy(p->path, "/nodes/", 7);
  vl__num_format_int(i, p->path + 7);
  p->at_node = false;
}

/* A copy of string entry i, cut to fit buf (for messages and pointers). */
static const char *text_of(const vl__jr *r, uint32_t i, char *buf, size_t n) {
  size_t len = r->tape[i].len < n - 1 ? r->tape[i].len : n - 1;
  memcpy(buf, vl__jt_bytes(r, i), len);
  buf[len] = '\0';
  return buf;
}

/* ---- names ---- */

static uint32_t hash_span(const parser *p, const char *s, size_t n) {
  return (uint32_t)vl__store_hash(p->g->store, s, n);
}

/* Is the C string name the span s[0..n) (which holds no NUL)? strncmp stops at name's end. */
static bool name_is(const char *name, const char *s, size_t n) {
  return strncmp(name, s, n) == 0 && name[n] == '\0';
}

static name_slot_t *name_slot(parser *p, const char *s, size_t n, uint32_t h) {
  name_table *t = &p->names;
  uint32_t i = h & t->mask;
  while (t->slots[i].node != 0 && (t->slots[i].hash != h || !name_is(t->slots[i].name, s, n))) {
    i = (i + 1) & t->mask;
  }
  return &t->slots[i];
}

/* Keeps the table at most half full. */
static bool names_grow(parser *p) {
  name_table *t = &p->names;
  if (t->slots != NULL && (uint64_t)(t->count + 1) * 2 <= (uint64_t)t->mask + 1) return true;
  uint32_t cap = t->slots ? (t->mask + 1) * 2 : 1024;
  name_slot_t *old = t->slots;
  uint32_t old_cap = t->slots ? t->mask + 1 : 0;
  name_slot_t *slots = cap ? calloc(cap, sizeof *slots) : NULL;
  if (slots == NULL) return false;
  t->slots = slots;
  t->mask = cap - 1;
  for (uint32_t k = 0; k < old_cap; k++) {
    if (old[k].node == 0) continue;
    uint32_t i = old[k].hash & t->mask;
    while (slots[i].node != 0) i = (i + 1) & t->mask;
    slots[i] = old[k];
  }
  free(old);
  return true;
}

static uint32_t name_lookup(parser *p, const char *s, size_t n) {
  uint32_t v = name_slot(p, s, n, hash_span(p, s, n))->node;
  return v ? v - 1 : VL_NO_NODE;
}

/* A reference from the current node to string entry e: it must name an earlier node. */
static vl_status resolve(parser *p, uint32_t e, const char *sub, uint32_t *out) {
  const char *s = vl__jt_bytes(&p->r, e);
  size_t n = p->r.tape[e].len;
  char name[80];
  uint32_t idx = name_lookup(p, s, n);
  if (idx != VL_NO_NODE && idx != p->index && p->g->nodes[idx].n_vals == 0) {
    *out = idx;
    return VL_OK;
  }
  text_of(&p->r, e, name, sizeof name);
  if (idx == VL_NO_NODE) { /* later or unknown: the rest of the nodes will tell */
    pending_ref *q = &p->pending;
    if (p->at_node) node_path(p, p->index);
    snprintf(q->path, sizeof q->path, "%s", p->path);
    snprintf(q->sub, sizeof q->sub, "%s", sub);
    q->name = vl__jt_dup(&p->r, e);
    if (q->name == NULL) return VL_ERR_NOMEM;
    q->set = true;
    return FAIL(p, sub, "unknown node \"%.64s\"", name);
  }
  if (idx == p->index) return FAIL(p, sub, "node \"%.64s\" refers to itself", name);
  /* A node with several outputs is read only as args[0] of an operator.getitem
   * (docs/format.md §2). */
  if (p->g->nodes[idx].n_vals > 0 && !(p->getitem && strcmp(sub, "/args/0") == 0)) {
    return FAIL(p, sub,
                "\"%.64s\" has several outputs (vals): read one through operator.getitem", name);
  }
  *out = idx;
  return VL_OK;
}

/* ---- objects ---- */

/* Sorts the members of object entry obj into field[k] (the value's entry, NO_ENTRY when
 * absent) by keys[0..count). The first unknown or repeated key is an error (code) at
 * base + sub + "/key", returned after the whole object is sorted, so callers may look at other
 * fields first. */
static vl_status read_keys(parser *p, uint32_t obj, const key_name *keys, size_t count,
                           uint32_t *field, const char *base, const char *sub, vl_status code) {
  const vl__jr *r = &p->r;
  uint32_t k = obj + 1, bad = NO_ENTRY;
  bool dup = false;
  for (size_t f = 0; f < count; f++) field[f] = NO_ENTRY;
  for (uint32_t m = 0; m < r->tape[obj].len; m++, k = r->tape[k + 1].next) {
    const char *b = vl__jt_bytes(r, k);
    size_t n = r->tape[k].len, f = 0;
    while (f < count && !(keys[f].n == n && memcmp(keys[f].s, b, n) == 0)) f++;
    if (f < count && field[f] == NO_ENTRY) {
      field[f] = k + 1;
    } else if (bad == NO_ENTRY) {
      bad = k;
      dup = f < count;
    }
  }
  if (bad == NO_ENTRY) return VL_OK;
  if (p->at_node) node_path(p, p->index);
  char key[200], at[VL_ERROR_PATH_MAX], full[VL_ERROR_PATH_MAX];
  text_of(r, bad, key, sizeof key);
  snprintf(at, sizeof at, "%s", sub);
  vl_pointer_append(at, sizeof at, key);
  snprintf(full, sizeof full, "%.120s%.120s", base, at);
  return vl_error_set(p->err, code, full,
                      dup ? "duplicate key \"%.64s\"" : "unknown key \"%.64s\"", key);
}

static bool is(const parser *p, uint32_t e, vl__jt_type t) {
  return e != NO_ENTRY && vl__jt_kind(&p->r, e) == t;
}

/* A string entry as a C string in the graph's store (interned when intern), UTF-8 checked. */
static vl_status dup_text(parser *p, uint32_t e, const char *sub, bool intern, const char **out) {
  const char *b = vl__jt_bytes(&p->r, e);
  size_t n = p->r.tape[e].len;
  if (!vl__utf8_valid(b, n)) return FAIL(p, sub, "is not valid UTF-8");
  *out = intern ? vl__store_intern(p->g->store, b, n) : vl__store_str(p->g->store, b, n);
  return *out != NULL ? VL_OK : VL_ERR_NOMEM;
}

/* ---- tensor specs: found on the tape, read by vl__spec_read (spec_json.c) ---- */

static bool negative(const vl__jr *r, uint32_t c) {
  bool is_float;
  int64_t i = 0;
  double d = 0;
  if (vl__jt_kind(r, c) != VL__JT_NUMBER ||
      vl__num_parse(vl__jt_bytes(r, c), r->tape[c].len, &is_float, &i, &d) == VL__NUM_BAD) {
    return false;
  }
  return is_float ? d < 0 : i < 0;
}

static vl_status int_array(parser *p, uint32_t arr, size_t max_len, int64_t min, int64_t max,
                           int64_t *out, size_t *len, const char *path, vl_error *err) {
  const vl__jr *r = &p->r;
  if (!is(p, arr, VL__JT_ARRAY)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, path, "must be an array of integers");
  }
  size_t n = 0;
  char at[VL_ERROR_PATH_MAX];
  for (uint32_t c = arr + 1; n < r->tape[arr].len; c = r->tape[c].next, n++) {
    if (n >= max_len) {
      return vl_error_set(err, VL_ERR_INVALID_TENSOR, path, "has more than %zu entries", max_len);
    }
    if (!vl__jt_int(r, c, min, max, &out[n])) {
      vl__path_join_index(at, path, n);
      if (min == 0 && negative(r, c)) {
        return vl_error_set(err, VL_ERR_INVALID_TENSOR, at, "must not be negative");
      }
      return vl__json_int_range_error(err, VL_ERR_INVALID_TENSOR, at, min, max);
    }
  }
  *len = n;
  return VL_OK;
}

/* The tape's side of a vl__spec_src (spec_json.h): a handle is a const uint32_t * entry. */
static bool tape_text(void *ctx, const void *v, char *buf, size_t cap) {
  parser *p = ctx;
  uint32_t e = *(const uint32_t *)v;
  if (!is(p, e, VL__JT_STRING) || p->r.tape[e].len >= cap) return false;
  text_of(&p->r, e, buf, cap);
  return true;
}

static long tape_array_len(void *ctx, const void *v) {
  parser *p = ctx;
  uint32_t e = *(const uint32_t *)v;
  return is(p, e, VL__JT_ARRAY) ? (long)p->r.tape[e].len : -1;
}

static vl_status tape_ints(void *ctx, const void *v, int64_t max, const char *path, int64_t *out,
                           size_t *n, vl_error *err) {
  return int_array(ctx, *(const uint32_t *)v, VL_MAX_RANK, 0, max, out, n, path, err);
}

static int tape_boolean(void *ctx, const void *v) {
  parser *p = ctx;
  uint32_t e = *(const uint32_t *)v;
  return is(p, e, VL__JT_TRUE) ? 1 : is(p, e, VL__JT_FALSE) ? 0 : -1;
}

/* The spec at entry obj; errors are relative to it (VL_ERR_INVALID_TENSOR). */
static vl_status spec_read(parser *p, uint32_t obj, vl_spec *out, vl_error *err) {
  if (!is(p, obj, VL__JT_OBJECT)) {
    return vl_error_set(err, VL_ERR_INVALID_TENSOR, "", "must be an object");
  }
  vl_error *saved = p->err;
  uint32_t f[VL__SPEC_MEMBERS];
  p->err = err;
  vl_status st = read_keys(p, obj, spec_keys, VL__SPEC_MEMBERS, f, "", "", VL_ERR_INVALID_TENSOR);
  p->err = saved;
  if (st != VL_OK) return st;
  vl__spec_src src = {.ctx = p, .text = tape_text, .array_len = tape_array_len,
                      .ints = tape_ints, .boolean = tape_boolean};
  for (int k = 0; k < VL__SPEC_MEMBERS; k++) src.member[k] = f[k] != NO_ENTRY ? &f[k] : NULL;
  return vl__spec_read(&src, out, err);
}

/* A spec under the node: errors re-labelled as graph errors at sub + their own path. */
static vl_status node_spec(parser *p, uint32_t e, const char *sub, vl_spec *out) {
  vl_error e2;
  vl_error_clear(&e2);
  if (spec_read(p, e, out, &e2) == VL_OK) return VL_OK;
  char at[VL_ERROR_PATH_MAX];
  snprintf(at, sizeof at, "%.40s%.200s", sub, e2.path);
  return FAIL(p, at, "%s", e2.message);
}

/* ---- arguments ---- */

/* A number literal (docs/format.md §2, "Literals are exact"): an integer token exactly in int64, a
 * float token the nearest double; an integer outside int64 or a float beyond the double range is an
 * error naming its place. */
static vl_status number_arg(parser *p, uint32_t e, const char *sub, vl_arg *out) {
  bool is_float = false;
  char text[48];
  switch (vl__num_parse(vl__jt_bytes(&p->r, e), p->r.tape[e].len, &is_float, &out->u.i,
                        &out->u.f)) {
  case VL__NUM_OK: out->kind = is_float ? VL_ARG_FLOAT : VL_ARG_INT; return VL_OK;
  case VL__NUM_RANGE:
    text_of(&p->r, e, text, sizeof text);
    if (is_float) {
      return FAIL(p, sub,
                  "%s is beyond the range of a double (write {\"float\": \"inf\"} for infinity)",
                  text);
    }
    return FAIL(p, sub, "integer %s is outside the int64 range", text);
  case VL__NUM_BAD: break;
  }
  return FAIL(p, sub, "is not a JSON number");
}

/* {"float": "inf" | "-inf" | "nan"}: a non-finite float literal (docs/format.md §2). */
static vl_status float_word_arg(parser *p, uint32_t e, const char *sub, vl_arg *out) {
  static const struct {
    const char *word;
    double value;
  } words[] = {{"inf", INFINITY}, {"-inf", -INFINITY}, {"nan", NAN}};
  if (p->r.tape[e].len == 1 && vl__jt_is(&p->r, e + 1, "float")) {
    for (size_t k = 0; k < sizeof words / sizeof *words; k++) {
      if (vl__jt_is(&p->r, e + 2, words[k].word)) {
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

/* Appends "/<i>" to sub (length len) without snprintf. */
static void sub_index(char *sub, size_t len, uint32_t i) {
  if (len + 12 >= VL_ERROR_PATH_MAX) return;
  sub[len] = '/';
  if (i < 10) { /* nearly every index */
    sub[len + 1] = (char)('0' + i);
    sub[len + 2] = '\0';
    return;
  }
  vl__num_format_int(i, sub + len + 1);
}

/* Converts entry e into an argument. In args strings are references; in kwargs they are
 * string literals (kwargs.out is handled by the caller). */
static vl_status parse_arg(parser *p, uint32_t e, bool strings_are_refs, char *sub, vl_arg *out) {
  memset(out, 0, sizeof *out);
  const vl__jr *r = &p->r;
  switch (vl__jt_kind(r, e)) {
  case VL__JT_NULL: return VL_OK;
  case VL__JT_TRUE:
  case VL__JT_FALSE:
    out->kind = VL_ARG_BOOL;
    out->u.b = vl__jt_kind(r, e) == VL__JT_TRUE;
    return VL_OK;
  case VL__JT_NUMBER: return number_arg(p, e, sub, out);
  case VL__JT_OBJECT: return float_word_arg(p, e, sub, out);
  case VL__JT_STRING:
    if (strings_are_refs) {
      out->kind = VL_ARG_REF;
      return resolve(p, e, sub, &out->u.ref);
    }
    out->kind = VL_ARG_STRING;
    return dup_text(p, e, sub, true, &out->u.s);
  case VL__JT_ARRAY: break;
  }
  uint32_t n = r->tape[e].len;
  out->kind = VL_ARG_LIST;
  if (n == 0) return VL_OK;
  out->u.items = vl__store_calloc(p->g->store, n, sizeof(vl_arg));
  if (out->u.items == NULL) return VL_ERR_NOMEM;
  size_t sublen = strlen(sub);
  for (uint32_t c = e + 1; out->count < n; c = r->tape[c].next) {
    sub_index(sub, sublen, out->count);
    vl_status st = parse_arg(p, c, strings_are_refs, sub, &out->u.items[out->count]);
    sub[sublen] = '\0';
    out->count++;
    if (st != VL_OK) return st;
  }
  return VL_OK;
}

static vl_status parse_args(parser *p, vl_node *n, uint32_t args) {
  if (args == NO_ENTRY) return VL_OK;
  if (!is(p, args, VL__JT_ARRAY)) return FAIL(p, "/args", "must be an array");
  uint32_t count = p->r.tape[args].len;
  if (count == 0) return VL_OK;
  if ((n->args = vl__store_calloc(p->g->store, count, sizeof *n->args)) == NULL) {
    return VL_ERR_NOMEM;
  }
  char sub[VL_ERROR_PATH_MAX] = "/args";
  for (uint32_t c = args + 1; n->n_args < count; c = p->r.tape[c].next) {
    sub_index(sub, 5, n->n_args);
    vl_status st = parse_arg(p, c, true, sub, &n->args[n->n_args]);
    n->n_args++;
    if (st != VL_OK) return st;
  }
  return VL_OK;
}

static vl_status parse_kwargs(parser *p, vl_node *n, uint32_t kw) {
  const vl__jr *r = &p->r;
  if (kw == NO_ENTRY) return VL_OK;
  if (!is(p, kw, VL__JT_OBJECT)) return FAIL(p, "/kwargs", "must be an object");
  uint32_t count = r->tape[kw].len;
  if (count == 0) return VL_OK;
  /* Every key is allowed in kwargs; duplicates are found by a quadratic scan, so the key count
   * is bounded. */
  if (count > VL__MAX_KWARGS) {
    return fail(p, VL_ERR_TOO_LARGE, "/kwargs", "more than %d keyword arguments", VL__MAX_KWARGS);
  }
  if ((n->kwargs = vl__store_calloc(p->g->store, count, sizeof *n->kwargs)) == NULL) {
    return VL_ERR_NOMEM;
  }
  char sub[VL_ERROR_PATH_MAX], key[200];
  for (uint32_t k = kw + 1; n->n_kwargs < count; k = r->tape[k + 1].next) {
    text_of(r, k, key, sizeof key);
    vl__path_join(sub, "/kwargs", key);
    for (uint32_t i = 0; i < n->n_kwargs; i++) {
      if (name_is(n->kwargs[i].key, vl__jt_bytes(r, k), r->tape[k].len)) {
        return FAIL(p, sub, "duplicate key \"%.64s\"", key);
      }
    }
    if (!vl__utf8_valid(vl__jt_bytes(r, k), r->tape[k].len)) {
      return FAIL(p, sub, "key is not valid UTF-8");
    }
    vl_kwarg *kv = &n->kwargs[n->n_kwargs++];
    if ((kv->key = vl__store_intern(p->g->store, vl__jt_bytes(r, k), r->tape[k].len)) == NULL) {
      return VL_ERR_NOMEM;
    }
    if (strcmp(kv->key, "out") == 0) {
      if (!is(p, k + 1, VL__JT_STRING)) return FAIL(p, sub, "must name the destination node");
      kv->value.kind = VL_ARG_REF;
      vl_status st = resolve(p, k + 1, sub, &kv->value.u.ref);
      if (st != VL_OK) return st;
      n->out = kv->value.u.ref;
      continue;
    }
    vl_status st = parse_arg(p, k + 1, false, sub, &kv->value);
    if (st != VL_OK) return st;
  }
  return VL_OK;
}

static void mark_refs(const vl_arg *a, uint32_t *mark, uint32_t stamp) {
  if (a->kind == VL_ARG_REF) mark[a->u.ref] = stamp;
  if (a->kind != VL_ARG_LIST) return;
  for (uint32_t i = 0; i < a->count; i++) mark_refs(&a->u.items[i], mark, stamp);
}

/* Marks the nodes n's arguments reference, once: each mutates entry is then looked up in
 * O(1). (A search of the arguments per entry cost 256 passes over a list of millions.) */
static vl_status mark_args(parser *p, const vl_node *n) {
  if (p->mark_len < p->g->n_nodes) {
    uint32_t len = p->cap;
    uint32_t *mark = realloc(p->mark, (size_t)len * sizeof *mark);
    if (mark == NULL) return VL_ERR_NOMEM;
    memset(mark + p->mark_len, 0, (size_t)(len - p->mark_len) * sizeof *mark);
    p->mark = mark;
    p->mark_len = len;
  }
  for (uint32_t i = 0; i < n->n_args; i++) mark_refs(&n->args[i], p->mark, p->index + 1);
  return VL_OK;
}

static vl_status parse_mutates(parser *p, vl_node *n, uint32_t m) {
  const vl__jr *r = &p->r;
  if (m == NO_ENTRY) return VL_OK;
  if (!is(p, m, VL__JT_ARRAY)) return FAIL(p, "/mutates", "must be an array of node names");
  uint32_t count = r->tape[m].len;
  if (count == 0) return VL_OK;
  /* Each entry is looked up among the arguments, so the count is bounded like kwargs. */
  if (count > VL__MAX_KWARGS) {
    return fail(p, VL_ERR_TOO_LARGE, "/mutates", "more than %d mutated arguments", VL__MAX_KWARGS);
  }
  if ((n->mutates = vl__store_alloc(p->g->store, count * sizeof *n->mutates)) == NULL ||
      mark_args(p, n) != VL_OK) {
    return VL_ERR_NOMEM;
  }
  char sub[VL_ERROR_PATH_MAX] = "/mutates", name[80];
  for (uint32_t c = m + 1; n->n_mutates < count; c = r->tape[c].next) {
    sub_index(sub, 8, n->n_mutates);
    if (!is(p, c, VL__JT_STRING)) return FAIL(p, sub, "must be a node name");
    uint32_t ref;
    vl_status st = resolve(p, c, sub, &ref);
    if (st != VL_OK) return st;
    if (p->mark[ref] != p->index + 1) {
      return FAIL(p, sub, "\"%.64s\" is not among the node's arguments",
                  text_of(r, c, name, sizeof name));
    }
    n->mutates[n->n_mutates++] = ref;
  }
  return VL_OK;
}

static vl_status parse_val(parser *p, vl_node *n, uint32_t val) {
  if (val == NO_ENTRY) {
    return FAIL(p, "/val", "is required on placeholder and call_function nodes (or vals, on a "
                           "call with several outputs)");
  }
  vl_spec spec;
  vl_status st = node_spec(p, val, "/val", &spec);
  if (st != VL_OK) return st;
  if ((n->val = vl__store_spec(p->g->store, &spec)) == NULL) return VL_ERR_NOMEM;
  n->has_val = true;
  return VL_OK;
}

/* "vals" of a node with several outputs: a non-empty array of specs. */
static vl_status parse_vals(parser *p, vl_node *n, uint32_t vals) {
  if (!is(p, vals, VL__JT_ARRAY)) return FAIL(p, "/vals", "must be an array of tensor specs");
  uint32_t count = p->r.tape[vals].len;
  if (count == 0) return FAIL(p, "/vals", "must list at least one output");
  if (count > VL__MAX_KWARGS) {
    return fail(p, VL_ERR_TOO_LARGE, "/vals", "more than %d outputs", VL__MAX_KWARGS);
  }
  vl_spec *specs = vl__store_calloc(p->g->store, count, sizeof *specs);
  if (specs == NULL) return VL_ERR_NOMEM;
  n->vals = specs;
  char sub[VL_ERROR_PATH_MAX] = "/vals";
  for (uint32_t c = vals + 1; n->n_vals < count; c = p->r.tape[c].next) {
    sub_index(sub, 5, n->n_vals);
    vl_status st = node_spec(p, c, sub, &specs[n->n_vals]);
    if (st != VL_OK) return st;
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
  if (src->n_vals == 0) {
    return FAIL(p, "/args/0",
                "\"%.64s\" has a single output (val): operator.getitem reads a node with vals",
                src->name);
  }
  if (n->args[1].kind != VL_ARG_INT) return FAIL(p, "/args/1", "the index must be an integer");
  if (n->args[1].u.i < 0 || n->args[1].u.i >= src->n_vals) {
    return FAIL(p, "/args/1", "index %lld is out of range: \"%.64s\" has %u outputs",
                (long long)n->args[1].u.i, src->name, src->n_vals);
  }
  if (n->n_kwargs > 0) return FAIL(p, "/kwargs", "operator.getitem takes no kwargs");
  if (n->n_mutates > 0) return FAIL(p, "/mutates", "operator.getitem writes nothing");
  if (!vl_spec_equal(n->val, &src->vals[n->args[1].u.i])) {
    return FAIL(p, "/val", "disagrees with /vals/%lld of \"%.64s\"", (long long)n->args[1].u.i,
                src->name);
  }
  return VL_OK;
}

/* ---- nodes ---- */

static vl_status parse_placeholder(parser *p, vl_node *n, const uint32_t *f) {
  static const char *const kinds[] = {"user_input", "parameter", "buffer", "constant"};
  static const int forbidden[] = {K_TARGET,   K_ARGS, K_KWARGS, K_MUTATES,
                                  K_ALIAS_OF, K_VALS, K_OFFSET};
  uint32_t kind = f[K_KIND], mut = f[K_MUTATED];
  for (size_t i = 0; i < sizeof forbidden / sizeof *forbidden; i++) {
    if (f[forbidden[i]] != NO_ENTRY) {
      char sub[64];
      snprintf(sub, sizeof sub, "/%s", node_keys[forbidden[i]].s);
      return FAIL(p, sub, "a placeholder has no %s", node_keys[forbidden[i]].s);
    }
  }
  if (kind != NO_ENTRY) {
    bool found = false;
    for (int k = 0; k < 4 && !found; k++) {
      if (vl__jt_is(&p->r, kind, kinds[k])) {
        n->kind = (vl_input_kind)k;
        found = true;
      }
    }
    if (!found) return FAIL(p, "/kind", "must be user_input, parameter, buffer or constant");
  }
  if (mut != NO_ENTRY && !is(p, mut, VL__JT_TRUE) && !is(p, mut, VL__JT_FALSE)) {
    return FAIL(p, "/mutated", "must be true or false");
  }
  n->mutated = is(p, mut, VL__JT_TRUE);
  return parse_val(p, n, f[K_VAL]);
}

static bool target_well_formed(const char *t, size_t len) {
  /* namespace.operator[.overload]: two or three non-empty dot-separated parts. */
  int parts = 1;
  size_t run = 0;
  for (size_t i = 0; i < len; i++) {
    if (t[i] == '.') {
      if (run == 0) return false;
      parts++;
      run = 0;
    } else {
      run++;
    }
  }
  return run > 0 && (parts == 2 || parts == 3);
}

static vl_status parse_call(parser *p, vl_node *n, const uint32_t *f) {
  uint32_t target = f[K_TARGET];
  if (f[K_KIND] != NO_ENTRY || f[K_MUTATED] != NO_ENTRY) {
    return FAIL(p, "", "kind and mutated belong to placeholders only");
  }
  if (!is(p, target, VL__JT_STRING) ||
      !target_well_formed(vl__jt_bytes(&p->r, target), p->r.tape[target].len)) {
    return FAIL(p, "/target", "must be a string namespace.operator[.overload]");
  }
  vl_status st = dup_text(p, target, "/target", true, &n->target);
  if (st != VL_OK) return st;
  p->getitem = vl__jt_is(&p->r, target, VL__GETITEM);
  uint32_t val = f[K_VAL], vals = f[K_VALS];
  st = parse_args(p, n, f[K_ARGS]);
  if (st == VL_OK) st = parse_kwargs(p, n, f[K_KWARGS]);
  if (st == VL_OK) st = parse_mutates(p, n, f[K_MUTATES]);
  if (st == VL_OK && val != NO_ENTRY && vals != NO_ENTRY) {
    return FAIL(p, "/vals", "give either val or vals, not both");
  }
  if (st == VL_OK) st = vals != NO_ENTRY ? parse_vals(p, n, vals) : parse_val(p, n, val);
  if (st == VL_OK && p->getitem) st = check_getitem(p, n);
  uint32_t alias = f[K_ALIAS_OF];
  if (st == VL_OK && alias != NO_ENTRY) {
    if (!vl__is_memory_view(n)) {
      return FAIL(p, "/alias_of", "only memory.view nodes carry alias_of");
    }
    if (!is(p, alias, VL__JT_STRING)) return FAIL(p, "/alias_of", "must be a node name");
    st = resolve(p, alias, "/alias_of", &n->alias_of);
  }
  uint32_t offset = f[K_OFFSET];
  if (st == VL_OK && offset != NO_ENTRY) {
    if (!vl__is_memory_view(n)) return FAIL(p, "/offset", "only memory.view nodes carry offset");
    if (!vl__jt_int(&p->r, offset, 0, INT64_MAX, &n->offset)) {
      return FAIL(p, "/offset", "must be a whole number of elements >= 0");
    }
  }
  return st;
}

static vl_status parse_output(parser *p, vl_node *n, const uint32_t *f) {
  const vl__jr *r = &p->r;
  uint32_t first = NO_ENTRY; /* the first member other than name, op and args */
  for (int k = 0; k < K_NODE_COUNT; k++) {
    if (k != K_NAME && k != K_OP && k != K_ARGS && f[k] < first) first = f[k];
  }
  if (first != NO_ENTRY) {
    char key[80];
    return FAIL(p, "", "an output node has only name, op and args (found \"%.64s\")",
                text_of(r, first - 1, key, sizeof key));
  }
  uint32_t args = f[K_ARGS];
  if (!is(p, args, VL__JT_ARRAY)) return FAIL(p, "/args", "must be a flat list of node names");
  char sub[VL_ERROR_PATH_MAX] = "/args";
  uint32_t i = 0;
  for (uint32_t c = args + 1; i < r->tape[args].len; c = r->tape[c].next, i++) {
    sub_index(sub, 5, i);
    if (!is(p, c, VL__JT_STRING)) return FAIL(p, sub, "must be a node name");
  }
  vl_status st = parse_args(p, n, args);
  for (uint32_t a = 0; st == VL_OK && a < n->n_args; a++) {
    if (!p->g->nodes[n->args[a].u.ref].has_val) {
      sub_index(sub, 5, a);
      return FAIL(p, sub, "an output must be a tensor node");
    }
  }
  p->g->output = p->index;
  return st;
}

/* The node's name: present, non-empty, within the limit, UTF-8, not used before. */
static vl_status parse_name(parser *p, vl_node *n, uint32_t name) {
  char text[80];
  if (!is(p, name, VL__JT_STRING) || p->r.tape[name].len == 0) {
    return FAIL(p, "/name", "is required and must be a non-empty string");
  }
  const char *s = vl__jt_bytes(&p->r, name);
  size_t len = p->r.tape[name].len;
  if (len > p->lim->max_name_len) {
    return fail(p, VL_ERR_TOO_LARGE, "/name", "name is longer than %lld bytes",
                (long long)p->lim->max_name_len);
  }
  if (!vl__utf8_valid(s, len)) return FAIL(p, "/name", "is not valid UTF-8");
  if (!names_grow(p)) return VL_ERR_NOMEM;
  uint32_t h = hash_span(p, s, len);
  name_slot_t *slot = name_slot(p, s, len, h);
  if (slot->node != 0) {
    return FAIL(p, "/name", "duplicate name \"%.64s\" (first used by /nodes/%lld)",
                text_of(&p->r, name, text, sizeof text), (long long)(slot->node - 1));
  }
  if ((n->name = vl__store_str(p->g->store, s, len)) == NULL) return VL_ERR_NOMEM;
  *slot = (name_slot_t){p->index + 1, h, n->name};
  p->names.count++;
  return VL_OK;
}

/* mem_offset (docs/format.md §9): a byte offset in the arena (whether this node may carry one is
 * checked with the whole plan, after parsing). */
static vl_status parse_mem_offset(parser *p, vl_node *n, uint32_t v) {
  if (v == NO_ENTRY) return VL_OK;
  if (!vl__jt_int(&p->r, v, 0, VL_PLAN_MAX_BYTES, &n->mem_offset)) {
    return FAIL(p, "/mem_offset", "must be a whole number of bytes from 0 to 2^53");
  }
  n->has_mem_offset = true;
  return VL_OK;
}

static vl_status parse_node(parser *p, uint32_t j) {
  vl_node *n = &p->g->nodes[p->index];
  if (!is(p, j, VL__JT_OBJECT)) return FAIL(p, "", "a node must be an object");
  n->out = n->alias_of = VL_NO_NODE;
  p->getitem = false;
  uint32_t f[K_NODE_COUNT];
  vl_error key_err;
  vl_error *saved = p->err;
  p->err = &key_err;
  vl_status keys = read_keys(p, j, node_keys, K_NODE_COUNT, f, p->path, "", VL_ERR_INVALID_GRAPH);
  p->err = saved;
  vl_status st = parse_name(p, n, f[K_NAME]); /* name errors come first */
  if (st != VL_OK) return st;
  if (keys != VL_OK) {
    *p->err = key_err;
    return keys;
  }
  uint32_t op = f[K_OP];
  if (!is(p, op, VL__JT_STRING)) {
    return FAIL(p, "/op", "is required: placeholder, call_function or output");
  }
  if (vl__jt_is(&p->r, op, "placeholder")) {
    n->op = VL_NODE_PLACEHOLDER;
    st = parse_placeholder(p, n, f);
    return st == VL_OK ? parse_mem_offset(p, n, f[K_MEM_OFFSET]) : st;
  }
  if (vl__jt_is(&p->r, op, "call_function")) {
    n->op = VL_NODE_CALL;
    st = parse_call(p, n, f);
    return st == VL_OK ? parse_mem_offset(p, n, f[K_MEM_OFFSET]) : st;
  }
  if (vl__jt_is(&p->r, op, "output")) {
    n->op = VL_NODE_OUTPUT;
    return parse_output(p, n, f);
  }
  char text[40];
  return FAIL(p, "/op", "must be placeholder, call_function or output, not \"%.32s\"",
              text_of(&p->r, op, text, sizeof text));
}

/* Room for one more node (zeroed). */
static vl_status nodes_grow(parser *p) {
  vl_graph *g = p->g;
  if (g->n_nodes == p->cap) {
    uint32_t cap = p->cap ? (p->cap > UINT32_MAX / 2 ? UINT32_MAX : p->cap * 2) : 256;
    if (cap == p->cap) return VL_ERR_NOMEM;
    vl_node *nodes = realloc(g->nodes, (size_t)cap * sizeof *nodes);
    if (nodes == NULL) return VL_ERR_NOMEM;
    g->nodes = nodes;
    p->cap = cap;
  }
  memset(&g->nodes[g->n_nodes], 0, sizeof *g->nodes);
  g->nodes[g->n_nodes].val = &vl__spec_none;
  g->n_nodes++; /* owned from here on, so vl_graph_free releases what parsing allocated */
  return VL_OK;
}

/* Node p->index, read onto the tape: parsed, or (after a graph error) only looked at for the
 * name a pending reference wants. */
static void take_node(parser *p, uint32_t j) {
  p->at_node = true;
  if (p->failed != VL_OK) {
    uint32_t name = vl__jt_get(&p->r, j, "name");
    if (p->pending.set && !p->pending.later && is(p, name, VL__JT_STRING) &&
        name_is(p->pending.name, vl__jt_bytes(&p->r, name), p->r.tape[name].len)) {
      p->pending.later = true;
    }
    return;
  }
  vl_status st = VL_OK;
  if (p->g->output != VL_NO_NODE) {
    node_path(p, p->g->output);
    st = FAIL(p, "/op", "the output node must be the last node");
  } else if (p->index >= p->lim->max_nodes) {
    p->at_node = false;
    p->path[0] = '\0';
    st = fail(p, VL_ERR_TOO_LARGE, "/nodes", "the graph has more than %lld nodes",
              (long long)p->lim->max_nodes);
  } else if ((st = nodes_grow(p)) == VL_OK) {
    st = parse_node(p, j);
  }
  if (st == VL_ERR_NOMEM) vl_error_set(p->err, st, "", "out of memory");
  if (st != VL_OK) p->failed = st;
}

/* The "nodes" array, one node at a time. */
static void read_nodes(parser *p) {
  vl__jr *r = &p->r;
  bool more = false;
  if (!vl__jr_open(r, '[')) return;
  for (bool first = true; vl__jr_next(r, ']', first, &more) && more; first = false, p->index++) {
    r->n = 0;
    r->arena_len = 0;
    uint32_t j = vl__jr_value(r);
    if (j == NO_ENTRY) return;
    take_node(p, j);
  }
}

/* docs/format.md §9: "plan": {"arena_bytes": N, "alignment": A}, A a power of two. */
static vl_status parse_plan(parser *p, uint32_t v) {
  static const key_name plan_keys[] = {KEY("arena_bytes"), KEY("alignment")};
  uint32_t f[2];
  if (!is(p, v, VL__JT_OBJECT)) return FAIL(p, "/plan", "must be an object");
  vl_status st = read_keys(p, v, plan_keys, 2, f, "/plan", "", VL_ERR_INVALID_GRAPH);
  if (st != VL_OK) return st;
  /* a member left out "is required", one present but out of its range "must be" */
  if (f[0] == NO_ENTRY || !vl__jt_int(&p->r, f[0], 0, VL_PLAN_MAX_BYTES, &p->g->plan_arena_bytes)) {
    return FAIL(p, "/plan/arena_bytes", "%s a whole number of bytes from 0 to 2^53",
                f[0] == NO_ENTRY ? "is required:" : "must be");
  }
  int64_t a = 0;
  if (f[1] == NO_ENTRY || !vl__jt_int(&p->r, f[1], 1, VL_PLAN_MAX_ALIGNMENT, &a) || (a & (a - 1))) {
    return FAIL(p, "/plan/alignment", "%s a power of two from 1 to %d",
                f[1] == NO_ENTRY ? "is required:" : "must be", VL_PLAN_MAX_ALIGNMENT);
  }
  p->g->plan_alignment = a;
  p->g->has_plan = true;
  return VL_OK;
}

/* One header member (the key is tape entry 0) other than nodes. */
static vl_status header_member(parser *p, uint32_t v) {
  const vl__jr *r = &p->r;
  int64_t version;
  if (vl__jt_is(r, 0, "format")) {
    p->seen_format = true;
    if (!vl__jt_is(r, v, "viewlower.graph")) {
      return FAIL(p, "/format", "unknown format (expected \"viewlower.graph\")");
    }
  } else if (vl__jt_is(r, 0, "version")) {
    p->seen_version = true;
    if (!vl__jt_int(r, v, 1, 1, &version)) {
      return FAIL(p, "/version", "unsupported version (expected 1)");
    }
  } else if (vl__jt_is(r, 0, "name")) {
    if (!is(p, v, VL__JT_STRING)) return FAIL(p, "/name", "must be a string");
    return dup_text(p, v, "/name", false, &p->g->name);
  } else if (vl__jt_is(r, 0, "skip_dim_order")) {
    if (!is(p, v, VL__JT_TRUE) && !is(p, v, VL__JT_FALSE)) {
      return FAIL(p, "/skip_dim_order", "must be true or false");
    }
    p->g->skip_dim_order = is(p, v, VL__JT_TRUE);
  } else if (vl__jt_is(r, 0, "plan")) {
    return parse_plan(p, v);
  }
  return VL_OK;
}

/* Is the key at tape entry 0 allowed and new? seen holds one bit per graph key. */
static vl_status header_key(parser *p, unsigned *seen, int *which) {
  char key[200], sub[VL_ERROR_PATH_MAX];
  text_of(&p->r, 0, key, sizeof key);
  vl__path_join(sub, "", key);
  for (int k = 0; graph_keys[k] != NULL; k++) {
    if (!vl__jt_is(&p->r, 0, graph_keys[k])) continue;
    if (*seen & (1u << k)) return FAIL(p, sub, "duplicate key \"%.64s\"", key);
    *seen |= 1u << k;
    *which = k;
    return VL_OK;
  }
  return FAIL(p, sub, "unknown key \"%.64s\"", key);
}

static void note(parser *p, vl_status st) {
  if (st == VL_ERR_NOMEM) vl_error_set(p->err, st, "", "out of memory");
  if (st != VL_OK && p->failed == VL_OK) p->failed = st;
}

/* The document: the outer object, streaming the nodes array. */
static void read_document(parser *p) {
  vl__jr *r = &p->r;
  bool more = false;
  unsigned seen = 0;
  if (!vl__jr_open(r, '{')) return;
  for (bool first = true; vl__jr_next(r, '}', first, &more) && more; first = false) {
    int which = -1;
    if (!vl__jr_key(r)) return;
    p->at_node = false;
    p->path[0] = '\0';
    if (p->failed == VL_OK) note(p, header_key(p, &seen, &which));
    if (vl__jt_is(r, 0, "nodes")) { /* streamed, even a repeated one (read for syntax) */
      p->seen_nodes = true;
      char c = 0;
      size_t at = vl__json_ws_end(r->text, r->len, r->pos);
      if (at < r->len) c = r->text[at];
      if (c == '[') {
        read_nodes(p);
        continue;
      }
      if (p->failed == VL_OK) note(p, FAIL(p, "/nodes", "is required and must be an array"));
    }
    uint32_t v = vl__jr_value(r);
    if (v == NO_ENTRY) return;
    p->at_node = false;
    p->path[0] = '\0';
    if (p->failed == VL_OK && which >= 0) note(p, header_member(p, v));
  }
}

/* What the whole text says: a problem of the JSON itself, else the first graph error. */
static vl_status finish(parser *p, bool nul_tail_ok) {
  vl__jr *r = &p->r;
  vl_status st = p->failed;
  p->at_node = false;
  if (r->problem == VL__JSON_OK) vl__jr_end(r, nul_tail_ok);
  size_t at = r->at;
  switch (r->problem) {
  case VL__JSON_NUL_ESCAPE:
    return vl_error_set(p->err, VL_ERR_PARSE, "",
                        "\\u0000 at byte %zu: strings cannot hold NUL characters", at);
  case VL__JSON_MALFORMED: {
    const char *why = vl__json_malformed_reason(r->text, r->len, at);
    return vl_error_set(p->err, VL_ERR_PARSE, "", "malformed JSON at byte %zu%s%s", at,
                        why[0] != '\0' ? ": " : "", why);
  }
  case VL__JSON_CONTROL:
    return vl_error_set(p->err, VL_ERR_PARSE, "",
                        "malformed JSON at byte %zu: control character 0x%02x", at,
                        (unsigned)(unsigned char)r->text[at]);
  case VL__JSON_TRAILING:
    return vl_error_set(p->err, VL_ERR_PARSE, "",
                        "trailing data after the JSON document at byte %zu", at);
  case VL__JSON_NOMEM: return vl_error_set(p->err, VL_ERR_NOMEM, "", "out of memory");
  case VL__JSON_OK: break;
  }
  if (st != VL_OK && p->pending.set && p->pending.later) {
    snprintf(p->path, sizeof p->path, "%s", p->pending.path);
    return FAIL(p, p->pending.sub,
                "\"%.64s\" is defined later (nodes must be in execution order)", p->pending.name);
  }
  if (st != VL_OK) return st;
  p->path[0] = '\0';
  if (!p->seen_format) return FAIL(p, "/format", "unknown format (expected \"viewlower.graph\")");
  if (!p->seen_version) return FAIL(p, "/version", "unsupported version (expected 1)");
  if (!p->seen_nodes) return FAIL(p, "/nodes", "is required and must be an array");
  if (p->g->n_nodes == 0) return FAIL(p, "/nodes", "a graph needs at least its output node");
  if (p->g->output == VL_NO_NODE) {
    node_path(p, p->g->n_nodes - 1);
    return FAIL(p, "/op", "the last node must be the output node");
  }
  return VL_OK;
}

static vl_status parse_text(const char *json, size_t len, const vl_limits *lim, bool check,
                            int max_depth, vl_graph **out, vl_error *err) {
  vl_limits dflt;
  lim = vl__limits_or_default(lim, &dflt);
  parser p;
  memset(&p, 0, sizeof p);
  p.lim = lim;
  p.err = err;
  vl__jr_init(&p.r, json, len);
  p.r.max_depth = max_depth;
  p.g = vl__graph_new();
  if (p.g == NULL) return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  char c = 0;
  for (size_t i = 0; i < len && c == 0; i++) {
    if (json[i] != ' ' && json[i] != '\t' && json[i] != '\n' && json[i] != '\r') c = json[i];
  }
  if (c == '{') {
    read_document(&p);
  } else if (vl__jr_value(&p.r) != NO_ENTRY) {
    note(&p, FAIL(&p, "", "a graph must be a JSON object"));
  }
  vl_status st = finish(&p, true);
  vl__jr_free(&p.r);
  free(p.pending.name);
  free(p.names.slots);
  free(p.mark);
  if (st == VL_OK) vl__graph_fit(p.g);
  if (st == VL_OK && vl_graph_index_users(p.g) != VL_OK) {
    st = vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  }
  if (st == VL_OK && check) st = vl__graph_check(p.g, err);
  if (st != VL_OK) {
    vl_graph_free(p.g);
    return st;
  }
  *out = p.g;
  return VL_OK;
}

/* Does j nest arrays or objects deeper than budget levels? Recursion stays within budget. */
static bool nested_deeper(const cJSON *j, int budget) {
  if (!cJSON_IsArray(j) && !cJSON_IsObject(j)) return false;
  if (budget == 0) return true;
  for (const cJSON *c = j->child; c; c = c->next) {
    if (nested_deeper(c, budget - 1)) return true;
  }
  return false;
}

/* tree_bounds' first refusal, also made of a text (vl__graph_text_bounds). */
static vl_status too_many_nodes(const vl_limits *lim, vl_error *err) {
  return vl_error_set(err, VL_ERR_TOO_LARGE, "/nodes", "the graph has more than %lld nodes",
                      (long long)lim->max_nodes);
}

/* Checks of a tree that its text form would not show in time: more nodes than the limit
 * (refused before any per-node work), and arguments nested deeper than cJSON itself nests
 * (a tree built with the cJSON API has no limit; every walk over arguments recurses). */
static vl_status tree_bounds(const cJSON *root, const vl_limits *lim, vl_error *err) {
  const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(root, "nodes");
  uint32_t i = 0;
  for (const cJSON *n = cJSON_IsArray(nodes) ? nodes->child : NULL; n != NULL; n = n->next, i++) {
    if (i >= lim->max_nodes) return too_many_nodes(lim, err);
  }
  i = 0;
  for (const cJSON *n = cJSON_IsArray(nodes) ? nodes->child : NULL; n != NULL; n = n->next, i++) {
    static const char *const fields[] = {"args", "kwargs"};
    for (size_t f = 0; f < 2; f++) {
      const cJSON *list = cJSON_GetObjectItemCaseSensitive(n, fields[f]);
      size_t k = 0;
      for (const cJSON *a = list != NULL ? list->child : NULL; a != NULL; a = a->next, k++) {
        if (!nested_deeper(a, CJSON_NESTING_LIMIT)) continue;
        char path[VL_ERROR_PATH_MAX];
        snprintf(path, sizeof path, "/nodes/%u/%s", i, fields[f]);
        if (cJSON_IsObject(list) && a->string != NULL) {
          vl_pointer_append(path, sizeof path, a->string);
        } else {
          vl_pointer_append_index(path, sizeof path, k);
        }
        return vl_error_set(err, VL_ERR_TOO_LARGE, path, "nested deeper than %d levels",
                            CJSON_NESTING_LIMIT);
      }
    }
  }
  if (nested_deeper(root, CJSON_NESTING_LIMIT + TREE_DEPTH_SLACK)) {
    return vl_error_set(err, VL_ERR_TOO_LARGE, "", "nested deeper than %d levels",
                        CJSON_NESTING_LIMIT);
  }
  return VL_OK;
}

/* A tree (from vl__json_parse_one, whose numbers keep their text, or built with the cJSON API)
 * is printed exactly and read by the one parser, so both paths agree on every rule and
 * pointer. An argument of a tree may nest as deep as cJSON nests a whole text (1000 levels),
 * so the text read from a tree allows the few levels above the arguments on top. */
vl_status vl_graph_from_json(const cJSON *root, const vl_limits *lim, vl_graph **out,
                             vl_error *err) {
  vl_limits dflt;
  lim = vl__limits_or_default(lim, &dflt);
  if (root == NULL) return vl_error_set(err, VL_ERR_INVALID_GRAPH, "", "a graph must be a JSON object");
  vl_status st = tree_bounds(root, lim, err);
  if (st != VL_OK) return st;
  size_t len = 0;
  char *text = vl__json_print(root, &len);
  if (text == NULL) return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  st = parse_text(text, len, lim, true, CJSON_NESTING_LIMIT + TREE_DEPTH_SLACK, out, err);
  free(text);
  return st;
}

/* Does the value r is at hold more than max entries, if it is an array (each checked, not
 * read)? false for any other value, whose failed open ends the caller's reading. */
static bool array_over(vl__jr *r, uint32_t max) {
  uint32_t count = 0;
  bool more = false;
  for (bool first = vl__jr_open(r, '['); first || more; first = false) {
    if (!vl__jr_next(r, ']', first, &more) || !more) return false;
    if (++count > max) return true;
    if (!vl__jr_check_value(r)) return false;
  }
  return false;
}

vl_status vl__graph_text_bounds(const char *json, size_t len, const vl_limits *lim,
                                vl_error *err) {
  vl_limits dflt;
  lim = vl__limits_or_default(lim, &dflt);
  vl__jr r;
  vl__jr_init(&r, json, len);
  bool over = false, more = false;
  for (bool first = vl__jr_open(&r, '{'); first || more; first = false) {
    if (!vl__jr_next(&r, '}', first, &more) || !more || !vl__jr_key(&r)) break;
    if (vl__jt_is(&r, 0, "nodes")) { /* the first "nodes" is the one a tree's lookup finds */
      over = array_over(&r, lim->max_nodes);
      break;
    }
    if (!vl__jr_check_value(&r)) break;
  }
  vl__jr_free(&r);
  return over ? too_many_nodes(lim, err) : VL_OK;
}

vl_status vl_graph_parse(const char *json, size_t len, const vl_limits *lim, vl_graph **out,
                         vl_error *err) {
  return parse_text(json, len, lim, true, CJSON_NESTING_LIMIT, out, err);
}

vl_status vl_graph_parse_unvalidated(const char *json, size_t len, const vl_limits *lim,
                                     vl_graph **out, vl_error *err) {
  return parse_text(json, len, lim, false, CJSON_NESTING_LIMIT, out, err);
}
