/* service.c - the methods of docs/protocol.md as pure calls (a table: adding a method is adding a
 * row). JSON params and a binary payload in, JSON result and payload out; error paths relative to
 * params. The daemon and viewlowerctl --local both call vl_service_call. */
#include "viewlower/service.h"

#include <stdlib.h>
#include <string.h>

#include "base/json_util.h"
#include "base/json_write.h"
#include "exec/kernel_internal.h"
#include "graph/graph_internal.h"
#include "graph/tensor_json_internal.h"
#include "layout/tensor_internal.h"
#include "viewlower/copy.h"
#include "viewlower/graph.h"
#include "viewlower/interp.h"
#include "viewlower/layout.h"
#include "viewlower/lower.h"
#include "viewlower/tensor_json.h"
#include "wire/service_internal.h"

#ifndef VL_VERSION_STRING
#define VL_VERSION_STRING "0.0.0"
#endif

const char *vl_version(void) {
  return VL_VERSION_STRING;
}

typedef struct {
  const cJSON *params;
  const uint8_t *payload;
  size_t payload_len;
  const vl_limits *lim;
  vl_buf *out_payload;
  vl_call_stats *stats;
  vl_error *err;
  bool may_lend;             /* vl__service_call_lending */
  bool lend_probe;           /* vl__service_lends: read the JSON only, never the payload's bytes */
  uint64_t max_result_bytes; /* JSON + payload bytes the caller can send back; 0: no bound */
} call;

typedef vl_status (*method_fn)(call *c, cJSON *result);

static const cJSON *param(const call *c, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(c->params, key);
}

static vl_status need_keys(call *c, const char *const *keys) {
  return vl__json_check_keys(c->params, keys, NULL, "", VL_ERR_INVALID_PARAMS, c->err);
}

/* Results are built into `result`; a NULL from cJSON means out of memory. */
static vl_status attach(call *c, cJSON *result, const char *key, cJSON *item) {
  if (item != NULL && cJSON_AddItemToObject(result, key, item)) return VL_OK;
  cJSON_Delete(item);
  return vl_error_set(c->err, VL_ERR_NOMEM, "", "out of memory building the result");
}

/* A raw graph (its text, see vl_service_call) read by the graph parser, with the error the
 * tree of that text gets: vl_graph_from_json prints a tree and reads the print with the same
 * parser, so a text that is JSON gets its tree's answer, except where the tree's first check
 * speaks before any node is read: more nodes than the limit (vl__graph_text_bounds, which
 * counts them over the text). A text that is no JSON gets the parser's own error, as its tree
 * cannot be built. (Until 2026-12-07 a refused text was built as a tree to ask it: a 4 MiB
 * graph of one unknown key's zeros then peaked at 339 MB.) fuzz_graph checks that a text and
 * its tree agree. */
static vl_status graph_from_text(call *c, const char *text, vl_graph **g) {
  size_t len = strlen(text);
  vl_status st = vl_graph_parse(text, len, c->lim, g, c->err);
  if (st == VL_OK || st == VL_ERR_NOMEM || st == VL_ERR_PARSE) return st;
  vl_error bounds;
  vl_error_clear(&bounds);
  if (vl__graph_text_bounds(text, len, c->lim, &bounds) != VL_OK) *c->err = bounds;
  return c->err->code;
}

static vl_status get_graph(call *c, vl_graph **g) {
  const cJSON *graph = param(c, "graph");
  if (graph == NULL) return vl_error_set(c->err, VL_ERR_INVALID_PARAMS, "/graph", "is required");
  vl_status st = cJSON_IsRaw(graph) ? graph_from_text(c, graph->valuestring, g)
                                    : vl_graph_from_json(graph, c->lim, g, c->err);
  if (st != VL_OK) vl_error_prefix(c->err, "/graph");
  return st;
}

static vl_status get_encoding(call *c, vl_encoding *enc) {
  const cJSON *e = param(c, "encoding");
  *enc = VL_ENCODING_VALUES;
  if (e == NULL || cJSON_IsNull(e)) return VL_OK;
  if (!cJSON_IsString(e) || !vl_encoding_from_name(e->valuestring, enc)) {
    return vl_error_set(c->err, VL_ERR_INVALID_PARAMS, "/encoding",
                        "must be \"values\", \"base64\" or \"blob\"");
  }
  return VL_OK;
}

/* Advances a row-major index over s's shape by one, keeping *off = sum idx[d] * strides[d]. */
static void logical_step(const vl_spec *s, const int64_t *strides, int64_t *idx, int64_t *off) {
  for (int d = (int)s->rank - 1; d >= 0; d--) {
    *off += strides[d];
    if (++idx[d] < s->shape[d]) return;
    *off -= strides[d] * s->shape[d];
    idx[d] = 0;
  }
}

/* t's elements in logical order as the text of one JSON array, in a raw item: each element is
 * printed as vl_scalar_to_json gives it and let go at once, so no tree of a node per element
 * (about 110 bytes each) is ever built; the text is the same, byte for byte. */
static cJSON *values_raw(const vl_tensor *t) {
  int64_t numel, strides[VL_MAX_RANK], idx[VL_MAX_RANK] = {0}, off = 0;
  if (!vl_spec_numel(&t->spec, &numel)) return NULL;
  vl_layout_strides(&t->spec, strides);
  size_t es = vl_dtype_size(t->spec.dtype);
  vl_buf buf = {0};
  vl__jw w = {&buf, false};
  vl__jw_char(&w, '[');
  for (int64_t k = 0; k < numel && !w.nomem; k++) {
    if (k > 0) vl__jw_char(&w, ',');
    cJSON *v = vl_scalar_to_json(t->spec.dtype, (const uint8_t *)t->data + (size_t)off * es);
    if (v == NULL) {
      w.nomem = true;
      break;
    }
    vl__jw_cjson(&w, v);
    cJSON_Delete(v);
    logical_step(&t->spec, strides, idx, &off);
  }
  vl__jw_char(&w, ']');
  return vl__json_raw_take(vl__jw_finish(&w, NULL)); /* the item takes the text: no copy */
}

/* t as tensor JSON; "values" streamed (values_raw), the other encodings by tensor_json. */
static cJSON *tensor_out(const vl_tensor *t, vl_encoding enc, vl_buf *payload) {
  if (enc != VL_ENCODING_VALUES) return vl_tensor_to_json(t, enc, payload);
  cJSON *obj = vl_spec_to_json(&t->spec), *values = obj != NULL ? values_raw(t) : NULL;
  if (values == NULL || !cJSON_AddItemToObject(obj, "values", values)) {
    cJSON_Delete(values);
    cJSON_Delete(obj);
    return NULL;
  }
  return obj;
}

/* Writes t into result[key] (or appends to the array result when key is NULL). "values" costs
 * text per element, so it is refused past a limit in favour of base64 or blob. */
static vl_status put_tensor(call *c, cJSON *result, const char *key, const vl_tensor *t,
                            vl_encoding enc) {
  vl_status st = vl_tensor_encoding_check(t, enc, c->lim, c->err);
  if (st != VL_OK) return st;
  cJSON *json = tensor_out(t, enc, c->out_payload);
  if (key != NULL) return attach(c, result, key, json);
  if (json != NULL && cJSON_AddItemToArray(result, json)) return VL_OK;
  cJSON_Delete(json);
  return vl_error_set(c->err, VL_ERR_NOMEM, "", "out of memory encoding outputs");
}

/* The fewest bytes a tensor of spec takes encoded as enc: blob, its bytes of payload; base64,
 * four characters of JSON per three bytes; values, one character and a separator per element. */
static uint64_t encoded_min_bytes(const vl_spec *spec, vl_encoding enc) {
  int64_t numel = 0, nbytes = 0;
  vl_spec_numel(spec, &numel);
  vl_spec_nbytes(spec, &nbytes);
  uint64_t n = (uint64_t)nbytes;
  switch (enc) {
  case VL_ENCODING_BLOB: return n;
  case VL_ENCODING_BASE64: return vl__base64_len(n);
  default: return (uint64_t)numel * 2;
  }
}

/* Refuses, before anything runs, a graph whose outputs' encoding alone would pass the caller's
 * bound of a result (its declared specs give their sizes; a dynamic one counts nothing here and
 * meets the caller's own check of the printed result): a graph may list one large tensor as an
 * output many times over, and each listing is a tensor of its own (1,000 listings of a 1 MiB
 * input held a worker for 7 s and 2 GB before the frame limit refused the result). */
static vl_status check_result_size(call *c, const vl_graph *g) {
  if (c->max_result_bytes == 0) return VL_OK;
  vl_encoding enc;
  vl_status st = get_encoding(c, &enc);
  if (st != VL_OK) return st;
  const vl_node *o = &g->nodes[g->output];
  uint64_t total = 0;
  for (uint32_t k = 0; k < o->n_args; k++) {
    if (o->args[k].kind != VL_ARG_REF) continue;
    const vl_node *src = &g->nodes[o->args[k].u.ref];
    uint64_t n = src->has_val && !src->val->dynamic ? encoded_min_bytes(src->val, enc) : 0;
    total = n > UINT64_MAX - total ? UINT64_MAX : total + n; /* saturates */
  }
  if (total <= c->max_result_bytes) return VL_OK;
  return vl_error_set(c->err, VL_ERR_TOO_LARGE, "",
                      "the graph's %u outputs take at least %llu bytes encoded, past the frame "
                      "limit of %llu bytes",
                      o->n_args, (unsigned long long)total,
                      (unsigned long long)c->max_result_bytes);
}

static vl_status get_inputs(call *c, vl_tensor_map **inputs) {
  const cJSON *in = param(c, "inputs");
  *inputs = NULL;
  if (in == NULL || cJSON_IsNull(in)) return VL_OK;
  if (!cJSON_IsObject(in)) {
    return vl_error_set(c->err, VL_ERR_INVALID_PARAMS, "/inputs",
                        "must be an object mapping placeholder names to tensors");
  }
  vl_status st = vl_tensor_map_from_json(in, c->payload, c->payload_len, c->lim, inputs, c->err);
  if (st != VL_OK) vl_error_prefix(c->err, "/inputs");
  return st;
}

static vl_status m_ping(call *c, cJSON *result) {
  (void)c;
  return cJSON_AddTrueToObject(result, "pong") ? VL_OK : VL_ERR_NOMEM;
}

static vl_status m_version(call *c, cJSON *result) {
  (void)c;
  bool ok = cJSON_AddStringToObject(result, "version", vl_version()) &&
            cJSON_AddNumberToObject(result, "protocol", VL_PROTOCOL_VERSION);
  return ok ? VL_OK : VL_ERR_NOMEM;
}

static vl_status m_validate(call *c, cJSON *result) {
  static const char *const keys[] = {"graph", NULL};
  vl_graph *g = NULL;
  vl_status st = need_keys(c, keys);
  if (st == VL_OK) st = get_graph(c, &g);
  if (st == VL_OK) st = attach(c, result, "graph", vl_graph_to_json(g));
  vl_graph_free(g);
  return st;
}

static vl_status get_options(call *c, vl_lower_options *o) {
  vl_status st = vl_lower_options_from_json(param(c, "options"), o, c->err);
  if (st != VL_OK) vl_error_prefix(c->err, "/options");
  return st;
}

static vl_status m_lower(call *c, cJSON *result) {
  static const char *const keys[] = {"graph", "options", NULL};
  vl_graph *g = NULL;
  vl_lower_options o;
  vl_report r = {0};
  vl_status st = need_keys(c, keys);
  if (st == VL_OK) st = get_options(c, &o);
  if (st == VL_OK) st = get_graph(c, &g);
  if (st == VL_OK) {
    st = vl_lower(g, &o, &r, c->err);
    /* A plan that cannot exist names its node (/nodes/k/val): a place in the graph. */
    if (st != VL_OK && st != VL_ERR_INVALID_PARAMS && c->err->path[0] != '\0') {
      vl_error_prefix(c->err, "/graph");
    }
  }
  if (st == VL_OK) st = attach(c, result, "graph", vl_graph_to_json(g));
  if (st == VL_OK) st = attach(c, result, "report", vl_report_to_json(&r));
  if (st == VL_OK && c->stats) {
    c->stats->views_replaced = r.replaced;
    c->stats->bytes_saved = r.bytes_saved;
  }
  vl_report_clear(&r);
  vl_graph_free(g);
  return st;
}

static vl_status m_execute(call *c, cJSON *result) {
  static const char *const keys[] = {"graph", "inputs", "encoding", NULL};
  vl_graph *g = NULL;
  vl_tensor_map *inputs = NULL, *outputs = NULL;
  vl_encoding enc;
  vl_status st = need_keys(c, keys);
  if (st == VL_OK) st = get_encoding(c, &enc);
  if (st == VL_OK) st = get_graph(c, &g);
  if (st == VL_OK) st = check_result_size(c, g);
  if (st == VL_OK) st = get_inputs(c, &inputs);
  if (st == VL_OK) {
    st = vl_interp_run(g, inputs, c->lim, &outputs, c->err);
    /* Missing inputs are named relative to the inputs object, everything else to the graph. */
    if (st != VL_OK) {
      vl_error_prefix(c->err, st == VL_ERR_INVALID_PARAMS || st == VL_ERR_INVALID_TENSOR
                                  ? "/inputs"
                                  : "/graph");
    }
  }
  cJSON *list = st == VL_OK ? cJSON_CreateArray() : NULL;
  if (st == VL_OK) st = attach(c, result, "outputs", list);
  for (size_t i = 0; st == VL_OK && i < outputs->count; i++) {
    st = put_tensor(c, list, NULL, outputs->tensors[i], enc);
  }
  vl_tensor_map_free(outputs);
  vl_tensor_map_free(inputs);
  vl_graph_free(g);
  return st;
}

static vl_status get_seed(call *c, uint64_t *seed) {
  const cJSON *s = param(c, "seed");
  int64_t v = 0;
  *seed = 0;
  if (s == NULL || cJSON_IsNull(s)) return VL_OK;
  /* 2^53, as documented and as viewlowerctl's --seed: the bound every JSON reader keeps exact */
  if (!vl__json_int(s, 0, (int64_t)1 << 53, &v)) {
    return vl_error_set(c->err, VL_ERR_INVALID_PARAMS, "/seed",
                        "must be a whole number in [0, 2^53]");
  }
  *seed = (uint64_t)v;
  return VL_OK;
}

static vl_status m_verify(call *c, cJSON *result) {
  static const char *const keys[] = {"graph", "options", "inputs", "seed", NULL};
  vl_graph *g = NULL;
  vl_tensor_map *inputs = NULL;
  vl_lower_options o;
  vl_verify_result vr;
  uint64_t seed = 0;
  memset(&vr, 0, sizeof vr);
  vl_status st = need_keys(c, keys);
  if (st == VL_OK) st = get_options(c, &o);
  if (st == VL_OK) st = get_seed(c, &seed);
  if (st == VL_OK) st = get_graph(c, &g);
  if (st == VL_OK) st = get_inputs(c, &inputs);
  if (st == VL_OK) {
    st = vl_verify(g, &o, inputs, seed, c->lim, &vr, c->err);
    if (st != VL_OK) {
      vl_error_prefix(c->err, st == VL_ERR_INVALID_PARAMS || st == VL_ERR_INVALID_TENSOR
                                  ? "/inputs"
                                  : "/graph");
    }
  }
  cJSON *json = st == VL_OK ? vl_verify_result_to_json(&vr) : NULL;
  /* The verify result's keys are the result's keys. */
  while (st == VL_OK && json != NULL && json->child != NULL) {
    cJSON *item = json->child;
    char *key = item->string;
    cJSON_DetachItemViaPointer(json, item);
    item->string = NULL;
    st = attach(c, result, key, item);
    cJSON_free(key);
  }
  if (st == VL_OK && json == NULL) st = vl_error_set(c->err, VL_ERR_NOMEM, "", "out of memory");
  if (st == VL_OK && c->stats) {
    c->stats->views_replaced = vr.report.replaced;
    c->stats->bytes_saved = vr.report.bytes_saved;
  }
  cJSON_Delete(json);
  vl_verify_result_clear(&vr);
  vl_tensor_map_free(inputs);
  vl_graph_free(g);
  return st;
}

static vl_status get_dims(call *c, const char *key, int64_t min, int64_t max, int64_t *v,
                          size_t *n) {
  char path[VL_ERROR_PATH_MAX];
  vl__path_join(path, "", key);
  return vl__json_int_array(param(c, key), VL_MAX_RANK, min, max, v, n, path, VL_ERR_INVALID_PARAMS,
                            c->err);
}

/* May view_copy answer with the input's own bytes? A borrowed blob input (not owned: it lies in
 * the request payload) in its memory order, copied into an output in its memory order, puts
 * every byte where it already is; the caller must let the response borrow the payload. */
static bool lends_input(const call *c, const vl_tensor *owned, const vl_tensor *in,
                        const vl_spec *out_spec, vl_encoding enc) {
  return c->may_lend && owned == NULL && enc == VL_ENCODING_BLOB && c->out_payload->data == NULL &&
         in->nbytes > 0 && vl_layout_is_contiguous(&in->spec) && vl_layout_is_contiguous(out_spec);
}

/* The output {dtype, shape, dim_order, blob at 0} over the input's bytes, lent to the response
 * (cap 0, see vl__service_call_lending). Its byte count is the input's, which passed the
 * tensor limits. */
static vl_status lend_input(call *c, cJSON *result, const vl_tensor *in, const vl_spec *spec) {
  vl_tensor lent = {*spec, in->nbytes, in->data};
  vl_status st =
      attach(c, result, "output", vl_tensor_to_json_take(&lent, VL_ENCODING_BLOB, c->out_payload));
  if (st != VL_OK) {
    memset(c->out_payload, 0, sizeof *c->out_payload); /* nothing lent on failure */
    return st;
  }
  c->out_payload->cap = 0; /* borrowed: the caller keeps the payload, frees nothing */
  return VL_OK;
}

/* view_copy's arguments, read and checked: the input (a borrowed view into the payload, or
 * owned), the size, the output's dim order, the encoding. */
typedef struct view_copy_args {
  int64_t size[VL_MAX_RANK];
  uint8_t dim_order[VL_MAX_RANK];
  size_t rank;
  bool has_order;
  vl_encoding enc;
  vl_tensor view, *owned; /* in is owned, or &view */
  const vl_tensor *in;
} view_copy_args;

static vl_status read_view_copy_args(call *c, view_copy_args *a) {
  static const char *const keys[] = {"input", "size", "out_dim_order", "encoding", NULL};
  int64_t order[VL_MAX_RANK];
  size_t order_rank = 0;
  a->rank = 0;
  a->owned = NULL;
  a->in = NULL;
  vl_status st = need_keys(c, keys);
  if (st == VL_OK) st = get_encoding(c, &a->enc);
  if (st == VL_OK && param(c, "size") == NULL) {
    st = vl_error_set(c->err, VL_ERR_INVALID_PARAMS, "/size", "is required");
  }
  const cJSON *jsize = param(c, "size");
  /* Rank over 16 is a kernel error (docs/protocol.md, "Methods"), not a malformed request. */
  if (st == VL_OK && cJSON_IsArray(jsize) && cJSON_GetArraySize(jsize) > VL_MAX_RANK) {
    st =
        vl_error_set(c->err, VL_ERR_KERNEL, "/size", "view_copy: rank %d exceeds the maximum of %d",
                     cJSON_GetArraySize(jsize), VL_MAX_RANK);
  }
  if (st == VL_OK) st = get_dims(c, "size", INT64_MIN, INT64_MAX, a->size, &a->rank);
  const cJSON *jorder = param(c, "out_dim_order");
  a->has_order = jorder != NULL && !cJSON_IsNull(jorder);
  /* Any list of whole numbers is an order the kernel judges (docs/protocol.md, "Methods"): one of
   * another length than the size, or with an entry that is no dim (16, -1), is not a
   * permutation of the output's dims, a kernel error like [1,1]; only an entry that is not a
   * whole number within 2^53 is a malformed param. */
  if (st == VL_OK && a->has_order && cJSON_IsArray(jorder) &&
      (size_t)cJSON_GetArraySize(jorder) != a->rank) {
    st = vl_error_set(c->err, VL_ERR_KERNEL, "/out_dim_order",
                      "has %d entries but the size has %zu", cJSON_GetArraySize(jorder), a->rank);
  }
  if (st == VL_OK && a->has_order) {
    st = get_dims(c, "out_dim_order", INT64_MIN, INT64_MAX, order, &order_rank);
  }
  for (size_t i = 0; i < order_rank; i++) {
    /* VL_MAX_RANK is no dim of any output: the kernel's permutation check refuses it */
    a->dim_order[i] = order[i] >= 0 && order[i] < VL_MAX_RANK ? (uint8_t)order[i] : VL_MAX_RANK;
  }
  if (st == VL_OK && param(c, "input") == NULL) {
    st = vl_error_set(c->err, VL_ERR_INVALID_PARAMS, "/input", "is required");
  }
  /* A blob input is read in place from the request payload (borrowed, not freed here), and a
   * blob output's storage becomes the response payload: no copy of the bytes either way. */
  if (st == VL_OK && c->lend_probe) {
    /* no copy and no check of the bytes: only an input lendable as it stands passes */
    st = vl__tensor_from_json_lendable(param(c, "input"), c->payload, c->payload_len, c->lim,
                                       &a->view, c->err);
    a->in = &a->view;
  } else if (st == VL_OK) {
    st = vl_tensor_from_json_borrow(param(c, "input"), c->payload, c->payload_len, c->lim, &a->view,
                                    &a->owned, c->err);
    if (st != VL_OK) vl_error_prefix(c->err, "/input");
    a->in = a->owned != NULL ? a->owned : &a->view;
  }
  return st;
}

/* The output dim order of a, NULL for the default. */
static const uint8_t *out_order(const view_copy_args *a) {
  return a->has_order ? a->dim_order : NULL;
}

static vl_status m_view_copy(call *c, cJSON *result) {
  view_copy_args a;
  vl_tensor *out = NULL;
  vl_spec out_spec;
  vl_status st = read_view_copy_args(c, &a);
  if (st == VL_OK) {
    st = vl__view_copy_spec(a.in, a.size, a.rank, out_order(&a), &out_spec, c->err);
    if (st == VL_OK && lends_input(c, a.owned, a.in, &out_spec, a.enc)) {
      /* owned is NULL and out not made: nothing to free */
      return lend_input(c, result, a.in, &out_spec);
    }
    if (st == VL_OK) st = vl_view_copy(a.in, a.size, a.rank, out_order(&a), c->lim, &out, c->err);
    if (st != VL_OK && c->err->path[0] == '\0') vl_error_prefix(c->err, "/size");
  }
  if (st == VL_OK) st = vl_tensor_encoding_check(out, a.enc, c->lim, c->err);
  if (st == VL_OK && a.enc == VL_ENCODING_BLOB) {
    st = attach(c, result, "output", vl_tensor_to_json_take(out, a.enc, c->out_payload));
  } else if (st == VL_OK) {
    st = put_tensor(c, result, "output", out, a.enc);
  }
  vl_tensor_free(a.owned);
  vl_tensor_free(out);
  return st;
}

/* The one method table: adding a method is adding a row (plus its client wrapper and CLI row). */
static const struct {
  vl_method_info info;
  method_fn fn;
} methods[] = {
    {{"ping", VL_METHOD_LIGHT}, m_ping},          {{"version", VL_METHOD_LIGHT}, m_version},
    {{"validate", VL_METHOD_HEAVY}, m_validate},  {{"lower", VL_METHOD_HEAVY}, m_lower},
    {{"execute", VL_METHOD_HEAVY}, m_execute},    {{"verify", VL_METHOD_HEAVY}, m_verify},
    {{"view_copy", VL_METHOD_HEAVY}, m_view_copy},
};

enum { N_METHODS = sizeof methods / sizeof methods[0] };

size_t vl_service_method_count(void) {
  return N_METHODS;
}

const vl_method_info *vl_service_method(size_t i) {
  return i < N_METHODS ? &methods[i].info : NULL;
}

int vl_service_method_index(const char *name) {
  for (size_t i = 0; i < N_METHODS; i++) {
    if (strcmp(methods[i].info.name, name) == 0) return (int)i;
  }
  return -1;
}

bool vl_service_has_method(const char *method) {
  return vl_service_method_index(method) >= 0;
}

static vl_status service_call(const char *method, const cJSON *params, const uint8_t *payload,
                              size_t payload_len, const vl_limits *lim, cJSON **result,
                              vl_buf *out_payload, vl_call_stats *stats, bool may_lend,
                              uint64_t max_result_bytes, vl_error *err) {
  vl_limits dflt;
  lim = vl__limits_or_default(lim, &dflt);
  vl_error_clear(err);
  int m = vl_service_method_index(method);
  method_fn fn = m >= 0 ? methods[m].fn : NULL;
  if (fn == NULL) {
    return vl_error_set(err, VL_ERR_UNKNOWN_METHOD, "", "unknown method \"%.64s\"", method);
  }
  cJSON empty = {0};
  empty.type = cJSON_Object;
  if (params == NULL || cJSON_IsNull(params)) params = &empty;
  if (!cJSON_IsObject(params)) {
    return vl_error_set(err, VL_ERR_INVALID_PARAMS, "", "params must be an object");
  }
  if (stats) memset(stats, 0, sizeof *stats);
  cJSON *res = cJSON_CreateObject();
  if (res == NULL) return vl_error_set(err, VL_ERR_NOMEM, "", "out of memory");
  call c = {.params = params, .payload = payload, .payload_len = payload_len, .lim = lim,
            .out_payload = out_payload, .stats = stats, .err = err, .may_lend = may_lend,
            .max_result_bytes = max_result_bytes};
  vl_status st = fn(&c, res);
  if (st != VL_OK) {
    if (err->code == VL_OK) vl_error_set(err, st, "", "%s", vl_status_text(st));
    cJSON_Delete(res);
    return st;
  }
  *result = res;
  return VL_OK;
}

vl_status vl_service_call(const char *method, const cJSON *params, const uint8_t *payload,
                          size_t payload_len, const vl_limits *lim, cJSON **result,
                          vl_buf *out_payload, vl_call_stats *stats, vl_error *err) {
  return service_call(method, params, payload, payload_len, lim, result, out_payload, stats, false,
                      0, err);
}

bool vl__service_lends(const char *method, const cJSON *params, const uint8_t *payload,
                       size_t payload_len, const vl_limits *lim) {
  int m = method != NULL ? vl_service_method_index(method) : -1;
  if (m < 0 || methods[m].fn != m_view_copy || !cJSON_IsObject(params)) {
    return false; /* only view_copy lends */
  }
  vl_limits dflt;
  lim = vl__limits_or_default(lim, &dflt);
  vl_error err;
  vl_buf none = {0};
  call c = {params, payload, payload_len, lim, &none, NULL, &err, true, true, 0};
  view_copy_args a;
  vl_spec out_spec;
  bool lends = read_view_copy_args(&c, &a) == VL_OK &&
               vl__view_copy_spec(a.in, a.size, a.rank, out_order(&a), &out_spec, &err) == VL_OK &&
               lends_input(&c, a.owned, a.in, &out_spec, a.enc);
  vl_tensor_free(a.owned);
  return lends;
}

vl_status vl__service_call_lending(const char *method, const cJSON *params, const uint8_t *payload,
                                   size_t payload_len, const vl_limits *lim,
                                   uint64_t max_result_bytes, cJSON **result, vl_buf *out_payload,
                                   vl_call_stats *stats, vl_error *err) {
  return service_call(method, params, payload, payload_len, lim, result, out_payload, stats, true,
                      max_result_bytes, err);
}
