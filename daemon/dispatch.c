/* dispatch.c - the method table and the life of one request: frame -> JSON-RPC checks ->
 * method -> response text -> statistics -> write.
 *
 * Where the work happens: anything that costs CPU in proportion to the request (parsing a
 * large JSON text, lowering, executing, verifying, printing a result) runs on libuv's thread
 * pool. A request whose JSON is small (LOOP_PARSE_MAX) is parsed on the loop, and answered
 * there when its method is light (ping, version) or the daemon's own (stats, which reads
 * loop-owned counters) or when it is invalid, so health checks never queue behind heavy work.
 * Each dispatched frame produces exactly one response, queued on its connection unless the
 * connection has closed meanwhile: then work already running finishes and is freed, and work
 * still queued is cancelled and freed unanswered.
 * The pool is shared by every connection: past --max-queued requests on it, a heavy request
 * is answered -32005 on the loop instead of queued, so neither memory nor the wait of
 * everybody else grows with the number of clients. */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "memory.h"
#include "wire/envelope.h"
#include "server.h"
#include "viewlower/service.h"

enum { LOOP_PARSE_MAX = VLD_SMALL_FRAME };

typedef enum {
  RUN_POOL,  /* a core method, on the thread pool */
  RUN_LIGHT, /* a core method cheap enough for the loop when its frame is small */
  RUN_LOOP,  /* the daemon's own method: on the loop, with the loop's state */
} run_where;

typedef cJSON *(*loop_method)(vl_server *srv);

typedef struct method {
  const char *name;
  run_where where;
  loop_method on_loop; /* RUN_LOOP only */
} method;

static cJSON *stats_method(vl_server *srv);

static const method methods[] = {
    {"ping", RUN_LIGHT, NULL},     {"version", RUN_LIGHT, NULL},      {"validate", RUN_POOL, NULL},
    {"lower", RUN_POOL, NULL},     {"execute", RUN_POOL, NULL},       {"verify", RUN_POOL, NULL},
    {"view_copy", RUN_POOL, NULL}, {"stats", RUN_LOOP, stats_method},
};

enum { N_METHODS = sizeof methods / sizeof methods[0] };
_Static_assert(N_METHODS <= VL_STATS_MAX_METHODS, "stats has a slot per method");

typedef struct vl_work {
  uv_work_t req;
  vl_conn *conn;
  struct vl_work *prev, *next; /* the connection's list of work on the pool */
  const vl_config *cfg;
  vl_frame frame;
  uint64_t start_ns;
  vl__rpc_request rpc;
  int method;   /* index into methods, -1 until known */
  bool parsed;  /* rpc was parsed (and found valid) on the loop */
  bool expired; /* the drain timed out while it was on the pool (vl_dispatch_expire) */
  bool over_memory; /* its work passed the memory budget: answered -32005 */
  bool uid_counted; /* counted in its user's queued requests */
  vl_status status;
  char *json; /* the response text; NULL until answered */
  size_t json_len;
  bool json_static;
  vl_buf payload;
  vl_call_stats call;
} work;

static void link_work(work *w) {
  vl_conn *c = w->conn;
  w->next = c->works;
  if (c->works != NULL) {
    c->works->prev = w;
  }
  c->works = w;
}

static void unlink_work(work *w) {
  vl_conn *c = w->conn;
  if (w->prev != NULL) {
    w->prev->next = w->next;
  } else {
    c->works = w->next;
  }
  if (w->next != NULL) {
    w->next->prev = w->prev;
  }
}

/* ---- any thread ------------------------------------------------------------------------ */

static vl_status parse(work *w, vl_error *err) {
  vl_status s = vl__rpc_request_parse(w->frame.json, w->frame.json_len, &w->rpc, err);
  if (s != VL_OK) {
    return s;
  }
  for (size_t i = 0; i < N_METHODS; i++) {
    if (strcmp(methods[i].name, w->rpc.method) == 0) {
      w->method = (int)i;
      return VL_OK;
    }
  }
  return vl_error_set(err, VL_ERR_UNKNOWN_METHOD, "", "unknown method \"%.64s\"", w->rpc.method);
}

/* Sets the error response text of err (with the id as far as it was read). */
static void respond_error(work *w, vl_error *err) {
  w->status = err->code;
  vl_buf_free(&w->payload);
  w->json = vl__rpc_error_text(w->rpc.id, err, &w->json_len);
  if (w->json == NULL) {
    w->json = (char *)vl__rpc_nomem_response;
    w->json_len = vl__rpc_nomem_response_len;
    w->json_static = true;
  }
}

/* Prints the response text of result (taken) into w; an error status (err set) when it
 * cannot be sent, and then no text. */
static vl_status print_result(work *w, cJSON *result, vl_error *err) {
  w->json = vl__rpc_result_text(w->rpc.id, result, &w->json_len);
  if (w->json == NULL) {
    return vl_error_set(err, VL_ERR_NOMEM, "", "cannot print the result");
  }
  uint64_t max = w->cfg->max_frame_bytes;
  if (w->json_len > UINT32_MAX || w->json_len > max || w->payload.len > max - w->json_len) {
    vl_error_set(err, VL_ERR_TOO_LARGE, "",
                 "the result of %zu JSON and %zu payload bytes exceeds the frame limit of %llu "
                 "bytes",
                 w->json_len, w->payload.len, (unsigned long long)max);
    free(w->json);
    w->json = NULL;
    return VL_ERR_TOO_LARGE;
  }
  return VL_OK;
}

/* Sets the response text of result (taken), or an error when it cannot be sent. */
static void respond_result(work *w, cJSON *result) {
  vl_error err;
  if (print_result(w, result, &err) != VL_OK) {
    respond_error(w, &err);
  }
}

/* Answers a request whose parse gave s: runs the core method when s is VL_OK. Releases the
 * request frame and document. */
static void serve(work *w, vl_status s, vl_error *err, bool on_pool) {
  cJSON *result = NULL;
  if (s == VL_OK) {
    /* On the pool, the method's work and the printing of its result stay within the memory
     * budget: an allocation past it fails, and the request is answered -32005 with its id.
     * The loop's light methods (ping, version, small invalid requests) always proceed. */
    if (on_pool) vld_mem_guard_begin();
    s = vl_service_call(w->rpc.method, w->rpc.params, w->frame.payload, w->frame.payload_len,
                        &w->cfg->limits, &result, &w->payload, &w->call, err);
    vl_frame_free(&w->frame);
    if (s == VL_OK) {
      s = print_result(w, result, err);
      result = NULL;
    }
    w->over_memory = on_pool && vld_mem_guard_end() && s == VL_ERR_NOMEM;
    if (w->over_memory) {
      vl_error_set(err, VL_ERR_OVERLOADED, "",
                   "overloaded: the work of this request would pass the daemon's memory budget "
                   "of %llu bytes (--max-memory); retry later",
                   (unsigned long long)vld_mem_budget());
    }
  }
  vl_frame_free(&w->frame);
  cJSON_Delete(result);
  if (s != VL_OK) {
    respond_error(w, err);
  }
  vl__rpc_request_free(&w->rpc);
}

/* Thread pool. A RUN_LOOP method is left unanswered here and answered in after_work. */
static void run_work(uv_work_t *req) {
  work *w = req->data;
  vl_error err;
  vl_error_clear(&err);
  vl_status s = w->parsed ? VL_OK : parse(w, &err);
  if (s == VL_OK && methods[w->method].where == RUN_LOOP) {
    vl_frame_free(&w->frame);
    return;
  }
  serve(w, s, &err, true);
}

/* ---- event loop ------------------------------------------------------------------------- */

static cJSON *stats_method(vl_server *srv) {
  const char *names[N_METHODS];
  for (size_t i = 0; i < N_METHODS; i++) {
    names[i] = methods[i].name;
  }
  vl_stats_view v = {.method_names = names,
                     .n_methods = N_METHODS,
                     .conns_current = srv->n_conns,
                     .requests_in_flight = srv->inflight,
                     .now_ns = uv_hrtime(),
                     .open_files_limit = srv->nofile,
                     .memory_budget = vld_mem_budget(),
                     .memory_in_use = vld_mem_in_use(),
                     .memory_peak = vld_mem_peak()};
  return vl_stats_to_json(&srv->stats, &v);
}

static void run_on_loop(work *w) {
  vl_frame_free(&w->frame);
  cJSON *result = methods[w->method].on_loop(w->conn->srv);
  if (result != NULL) {
    respond_result(w, result);
  } else {
    vl_error err;
    vl_error_set(&err, VL_ERR_NOMEM, "", "cannot build the %s result", methods[w->method].name);
    respond_error(w, &err);
  }
  vl__rpc_request_free(&w->rpc);
}

/* Counts the answered request, queues its response and frees w. */
static void complete(work *w) {
  vl_conn *c = w->conn;
  vl_server *srv = c->srv;
  uint64_t elapsed = uv_hrtime() - w->start_ns;
  vl_stats_record(&srv->stats, w->method, w->status != VL_OK, elapsed);
  srv->stats.shed[VLD_SHED_MEMORY] += w->over_memory;
  srv->stats.views_replaced += w->call.views_replaced;
  /* A client controls bytes_saved (huge dynamic upper bounds): saturate, never overflow. */
  if (__builtin_add_overflow(srv->stats.bytes_saved, w->call.bytes_saved, &srv->stats.bytes_saved))
    srv->stats.bytes_saved = INT64_MAX;
  vl_log_debug("conn %llu: %s -> %s in %.3f ms", (unsigned long long)c->serial,
               w->method >= 0 ? methods[w->method].name : "(invalid)", vl_status_kind(w->status),
               (double)elapsed / 1e6);
  vl_conn_send(c, w->json, w->json_len, w->json_static, &w->payload);
  free(w);
}

/* Work cancelled before it started (its connection closed): nobody is there to answer. */
static void drop_cancelled(work *w) {
  w->conn->srv->stats.cancelled++;
  vl_frame_free(&w->frame);
  vl__rpc_request_free(&w->rpc);
  free(w);
}

/* Work the drain timeout took off the queue before it started: its client is still there, so it
 * gets -32007 (SPEC §6: every accepted request gets exactly one response). Nothing ran on the
 * pool, so the frame is intact for finding the id when the loop did not parse it. */
static void respond_shutting_down(work *w) {
  vl_error err;
  vl_error_set(&err, VL_ERR_SHUTTING_DOWN, "",
               "shutting down: the drain timeout passed before this request started");
  if (!w->parsed) w->rpc.id = vl__rpc_peek_id(w->frame.json, w->frame.json_len);
  vl_frame_free(&w->frame);
  respond_error(w, &err);
  vl__rpc_request_free(&w->rpc);
  complete(w);
}

static void after_work(uv_work_t *req, int status) {
  work *w = req->data;
  vl_conn *c = w->conn;
  unlink_work(w);
  c->inflight--;
  c->srv->inflight--;
  vld_uid_use *u = w->uid_counted ? vld_uid_find(c->srv, c->uid) : NULL;
  if (u != NULL) {
    u->queued--;
    vld_uid_forget(c->srv, u);
  }
  if (status == UV_ECANCELED && w->expired && !c->closing) {
    respond_shutting_down(w);
  } else if (status == UV_ECANCELED) {
    drop_cancelled(w);
  } else {
    if (w->json == NULL) {
      run_on_loop(w);
    }
    complete(w);
  }
  vl_conn_settle(c);
  vl_conn_unref(c);
}

void vl_dispatch_cancel(vl_conn *c) {
  for (work *w = c->works; w != NULL; w = w->next) {
    /* Fails (UV_EBUSY) for work already running or done; that is answered as usual. */
    uv_cancel((uv_req_t *)&w->req);
  }
}

void vl_dispatch_expire(vl_conn *c) {
  for (work *w = c->works; w != NULL; w = w->next) {
    w->expired = true;
    uv_cancel((uv_req_t *)&w->req); /* running work (UV_EBUSY) finishes and is answered */
  }
}

/* May c queue one more request on the pool? Not past --max-queued for everybody, nor, while
 * another user is connected or has work, past --max-queued-per-uid for its user: one user
 * alone may use the whole queue, but cannot keep the others out of it. */
static bool pool_full(const vl_conn *c) {
  const vl_server *srv = c->srv;
  if (srv->inflight >= srv->cfg->max_queued) {
    return true;
  }
  for (size_t i = 0; srv->n_uids > 1 && i < srv->n_uids; i++) {
    if (srv->uids[i].uid == c->uid) {
      return srv->uids[i].queued >= srv->cfg->max_queued_per_uid;
    }
  }
  return false;
}

/* Answers -32005 at once, on the loop, and frees w; the connection stays usable. */
static void respond_overloaded(work *w) {
  vl_server *srv = w->conn->srv;
  vl_error err;
  if (srv->inflight >= srv->cfg->max_queued) {
    srv->stats.shed[VLD_SHED_QUEUE]++;
    vl_error_set(&err, VL_ERR_OVERLOADED, "",
                 "overloaded: %u requests are queued or running (--max-queued %u); retry later",
                 srv->inflight, srv->cfg->max_queued);
  } else {
    srv->stats.shed[VLD_SHED_UID]++;
    vl_error_set(&err, VL_ERR_OVERLOADED, "",
                 "overloaded: uid %u has %u requests queued or running (--max-queued-per-uid "
                 "%u); retry later",
                 (unsigned)w->conn->uid, srv->cfg->max_queued_per_uid,
                 srv->cfg->max_queued_per_uid);
  }
  vl_frame_free(&w->frame);
  respond_error(w, &err);
  vl__rpc_request_free(&w->rpc);
  complete(w);
}

/* A large request while the pool is full: parsing it would cost the loop what the pool is
 * for, so only its top-level id is looked for (vl__rpc_peek_id). Bound: one pass over at most
 * the frame's JSON (<= --max-frame-bytes), stopping at the id's value, allocating nothing but
 * the id: strings are crossed with memchr and nested values eight bytes at a time, about 12 ms
 * (strings) to 70 ms (number arrays) per 256 MiB here: of the order of receiving those bytes. */
static void refuse_unparsed(work *w) {
  w->rpc.id = vl__rpc_peek_id(w->frame.json, w->frame.json_len);
  respond_overloaded(w);
}

/* A small request parsed on the loop: answered right here unless its method is heavy. */
static bool answered_on_loop(work *w) {
  vl_error err;
  vl_error_clear(&err);
  vl_status s = parse(w, &err);
  if (s == VL_OK && methods[w->method].where == RUN_POOL) {
    if (pool_full(w->conn)) {
      respond_overloaded(w);
      return true;
    }
    w->parsed = true;
    return false;
  }
  if (s == VL_OK && methods[w->method].where == RUN_LOOP) {
    run_on_loop(w);
  } else {
    serve(w, s, &err, false);
  }
  complete(w);
  return true;
}

void vl_dispatch_frame(vl_conn *c, vl_frame *frame) {
  vl_server *srv = c->srv;
  work *w = calloc(1, sizeof *w);
  if (w == NULL) {
    vl_error err;
    vl_error_set(&err, VL_ERR_NOMEM, "", "out of memory");
    vl_frame_free(frame);
    vl_stats_record(&srv->stats, -1, 1, 0);
    vl_conn_send_error(c, &err);
    return;
  }
  w->req.data = w;
  w->conn = c;
  w->cfg = srv->cfg;
  w->frame = *frame;
  w->start_ns = uv_hrtime();
  w->method = -1;
  if (w->frame.json_len <= LOOP_PARSE_MAX) {
    if (answered_on_loop(w)) {
      return;
    }
  } else if (pool_full(c)) {
    refuse_unparsed(w);
    return;
  }
  /* uv_queue_work fails only for a NULL work callback. */
  uv_queue_work(srv->loop, &w->req, run_work, after_work);
  link_work(w);
  c->inflight++;
  srv->inflight++;
  vld_uid_use *u = vld_uid_find(srv, c->uid);
  w->uid_counted = u != NULL;
  if (u != NULL) {
    u->queued++;
  }
  vl_conn_ref(c);
  vl_server_watch_hangups(srv);
}
