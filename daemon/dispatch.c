/* dispatch.c - the life of one request: frame -> JSON-RPC checks -> method -> response text ->
 * statistics -> write. The methods are the core's one table (name, handler, weight: light on
 * the loop, heavy on the pool) plus the daemon's "stats"; transport and statistics are ours.
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
 * everybody else grows with the number of clients. Each loop hands libuv's pool (a FIFO) at most
 * --workers requests at a time; the rest wait in the loop's lanes, one per user, taken in turn
 * (fair_pump), so one user's hundreds of queued requests do not stand before another's. */
#define _GNU_SOURCE /* gettid */
#include "dispatch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "log.h"
#include "memory.h"
#include "viewlower/service.h"
#include "wire/envelope.h"
#include "wire/service_internal.h"

enum {
  LOOP_PARSE_MAX = VLD_SMALL_FRAME,
  LOOP_MAX_NODES = 64,
  TRIM_AFTER_JSON = 1 << 20,
  LOOP_WINDOW_NS = 1000000, /* 1 ms */
  LOOP_SPEND_NS = 900000,   /* of which small heavy requests take at most 0.9 ms */
};

/* Where a method runs: the core's by their weight; the daemon's own on the loop, with the
 * loop's state. Indexes: the core's methods (vl_service_method), then the daemon's. */
typedef enum {
  RUN_POOL,  /* a heavy core method, on the thread pool */
  RUN_LIGHT, /* a light core method: on the loop when its frame is small */
  RUN_LOOP,  /* the daemon's own method */
} run_where;

static const char *const daemon_methods[] = {"stats"};
enum { N_DAEMON_METHODS = sizeof daemon_methods / sizeof daemon_methods[0] };

size_t vld_dispatch_method_count(void) {
  return vl_service_method_count() + N_DAEMON_METHODS;
}

const char *vld_dispatch_method_name(size_t i) {
  size_t n = vl_service_method_count();
  return i < n ? vl_service_method(i)->name : i - n < N_DAEMON_METHODS ? daemon_methods[i - n] : "?";
}

static run_where where_of(int m) {
  const vl_method_info *info = vl_service_method((size_t)m);
  if (info == NULL) return RUN_LOOP;
  return info->weight == VL_METHOD_LIGHT ? RUN_LIGHT : RUN_POOL;
}

/* Index of a method by name, or -1. */
static int method_index(const char *name) {
  int m = vl_service_method_index(name);
  for (size_t i = 0; m < 0 && i < N_DAEMON_METHODS; i++) {
    if (strcmp(daemon_methods[i], name) == 0) m = (int)(vl_service_method_count() + i);
  }
  return m;
}

typedef struct vld_work {
  uv_work_t req;
  vld_dispatcher *d;
  vld_conn *conn;
  struct vld_work *prev, *next; /* the connection's list of work on the pool */
  const vld_config *cfg;
  vl_frame frame;
  uint64_t start_ns;
  vl__rpc_request rpc;
  int method;   /* a method index (method_index), -1 until known */
  bool parsed;  /* rpc was parsed (and found valid) on the loop */
  bool scanned; /* rpc was read by vl__rpc_request_scan (its graph is text, not yet checked) */
  bool expired; /* the drain timed out while it was on the pool (vld_dispatch_expire) */
  bool over_memory; /* its work passed the memory budget: answered -32005 */
  bool uid_counted; /* counted in its user's queued requests */
  bool over_share;  /* refused unstarted: its user's unread responses hold its memory share */
  bool served_on_loop; /* a small heavy request run on the loop (runs_on_loop) */
  bool waiting;        /* in its user's lane, not handed to libuv's pool yet */
  struct vld_work *lane_next;
  vl_status status;
  char *json; /* the response text; NULL until answered */
  size_t json_len;
  bool json_static;
  vl_buf payload;
  void *payload_owner; /* the request block a lent payload lies in (serve), or NULL */
  vl_call_stats call;
} work;

static void link_work(work *w) {
  vld_conn *c = w->conn;
  w->next = c->user;
  if (c->user != NULL) {
    ((work *)c->user)->prev = w;
  }
  c->user = w;
}

static void unlink_work(work *w) {
  vld_conn *c = w->conn;
  if (w->prev != NULL) {
    w->prev->next = w->next;
  } else {
    c->user = w->next;
  }
  if (w->next != NULL) {
    w->next->prev = w->prev;
  }
}

/* ---- any thread ------------------------------------------------------------------------ */

/* Reads the request: scanned (vl__rpc_request_scan) when scan allows, else by the strict
 * reader. A scanned graph is the frame's own text (no copy; the frame outlives the call): a
 * 100,000-node lowering of 17.9 MB peaked at 76 MB of RSS, 286 MB when read as a tree. */
static vl_status parse(work *w, bool scan, vl_error *err) {
  char *json = w->frame.json;
  size_t len = w->frame.json_len;
  w->scanned = scan && vl__rpc_request_scan(json, len, &w->rpc);
  vl_status s = w->scanned ? VL_OK : vl__rpc_request_parse(json, len, &w->rpc, err);
  if (s != VL_OK) {
    return s;
  }
  w->method = method_index(w->rpc.method);
  if (w->method >= 0) {
    return VL_OK;
  }
  return vl_error_set(err, VL_ERR_UNKNOWN_METHOD, "", "unknown method \"%.64s\"", w->rpc.method);
}

/* Sets the error response text of err (with the id as far as it was read). */
static void respond_error(work *w, vl_error *err) {
  w->status = err->code;
  vld_payload_free(&w->payload, w->payload_owner); /* its own block, or the request's */
  w->payload_owner = NULL;
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

/* The -32005 of a request whose work would pass the budget. */
static void set_over_memory(work *w, vl_error *err) {
  w->over_memory = true;
  vl_error_set(err, VL_ERR_OVERLOADED, "",
               "overloaded: the work of this request would pass the daemon's memory budget "
               "of %llu bytes (--max-memory); retry later",
               (unsigned long long)vld_mem_budget());
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
    s = vl__service_call_lending(w->rpc.method, w->rpc.params, w->frame.payload,
                                 w->frame.payload_len, &w->cfg->limits, w->cfg->max_frame_bytes,
                                 &result, &w->payload, &w->call, err);
    if (s != VL_OK && s != VL_ERR_NOMEM && w->scanned &&
        !vl__rpc_request_graph_checked(&w->rpc)) {
      /* The scan left the graph's text unchecked and it is no JSON value: a failed call is
       * answered as the strict reader has it (its errors, in its order), reading the request
       * again. A graph of valid JSON would fail the same way again: a large invalid graph is
       * not read twice, nor built as a tree (16 times its text). */
      vl__rpc_request_restore(&w->rpc);
      vl__rpc_request_free(&w->rpc);
      vl_buf_free(&w->payload);
      vl_error_clear(err);
      w->scanned = false;
      s = vl__rpc_request_parse(w->frame.json, w->frame.json_len, &w->rpc, err);
      if (s == VL_OK) {
        s = vl__service_call_lending(w->rpc.method, w->rpc.params, w->frame.payload,
                                     w->frame.payload_len, &w->cfg->limits,
                                     w->cfg->max_frame_bytes, &result, &w->payload, &w->call, err);
      } else {
        w->method = -1; /* counted as the strict reader counts it: an invalid request */
      }
    }
    if (s == VL_OK && w->payload.data != NULL && w->payload.cap == 0) {
      /* lent from the request payload: the request block lives on until the response is sent */
      w->payload_owner = w->frame.json;
      memset(&w->frame, 0, sizeof w->frame);
    }
    vl_frame_free(&w->frame);
    if (s == VL_OK) {
      s = print_result(w, result, err);
      result = NULL;
    }
    if (on_pool && vld_mem_guard_end() && s == VL_ERR_NOMEM) set_over_memory(w, err);
  }
  vl_frame_free(&w->frame);
  cJSON_Delete(result);
  if (s != VL_OK) {
    respond_error(w, err);
  }
  vl__rpc_request_free(&w->rpc);
}

/* Parses a large request on the pool within the memory budget: the tree of a request text
 * costs several times the text (about 110 bytes per number of "[0,0,...]"), so it is built
 * under the guard, and a tree that would pass the budget is dropped half-built and the request
 * answered -32005 with its id (found by the scanner, which allocates only the id). */
static vl_status parse_within_budget(work *w, vl_error *err) {
  vld_mem_guard_begin();
  vl_status s = parse(w, true, err);
  if (vld_mem_guard_end() && s == VL_ERR_NOMEM) {
    vl__rpc_request_free(&w->rpc);
    w->rpc.id = vl__rpc_peek_id(w->frame.json, w->frame.json_len);
    set_over_memory(w, err);
    return VL_ERR_OVERLOADED;
  }
  return s;
}

/* A worker runs --worker-nice nicer than the loop, set when the thread first takes work (libuv
 * starts its pool itself). Linux gives each thread its own nice; in a cgroup of the daemon's own
 * (the systemd unit) nice weighs the daemon's threads against each other only, and the loop
 * preempts a worker on every wake-up. At the same nice, a worker's 2,000-node lowering sharing
 * a core with the loop held pings back: with the other core busy their p99 was 3-4 ms, and
 * 0.5-1.0 ms at +10 (+3 and SCHED_BATCH did not help). Failure (a nice at 19) is harmless. */
static void renice_worker(const vld_config *cfg) {
  static _Thread_local bool done;
  if (done || cfg->worker_nice == 0) {
    return;
  }
  done = true;
  errno = 0;
  int nice = getpriority(PRIO_PROCESS, 0);
  if (errno == 0) {
    int to = nice + (int)cfg->worker_nice;
    (void)setpriority(PRIO_PROCESS, (id_t)gettid(), to > 19 ? 19 : to);
  }
}

/* Is w's user at its memory share of unread responses, with another user present (the rule:
 * vld_shares_over_memory)? Its connections are not read then, but requests read before still
 * wait for a worker: they are not started, so the user's unread answers stop growing at its
 * share plus what the workers were already running. */
static bool user_over_share(const work *w) {
  vld_dispatcher *d = w->d;
  if (!vld_shares_any_over(d->shares)) {
    return false;
  }
  uv_mutex_lock(d->mu);
  bool over = vld_shares_over_memory(d->shares, w->conn->uid); /* uid is fixed: read anywhere */
  uv_mutex_unlock(d->mu);
  return over;
}

/* Answers w -32005 unstarted, on the worker: its user is at its memory share. */
static void refuse_over_share(work *w) {
  vl_error err;
  vl_error_set(&err, VL_ERR_OVERLOADED, "",
               "overloaded: uid %u has unread responses holding its share of the memory budget "
               "(--max-memory-per-uid %llu bytes) while other users are connected; read them, "
               "then retry",
               (unsigned)w->conn->uid, (unsigned long long)w->d->shares->unsent_share);
  if (!w->parsed) w->rpc.id = vl__rpc_peek_id(w->frame.json, w->frame.json_len);
  w->over_share = true;
  vl_frame_free(&w->frame);
  respond_error(w, &err);
  vl__rpc_request_free(&w->rpc);
}

/* Thread pool. A RUN_LOOP method is left unanswered here and answered in after_work. */
static void run_work(uv_work_t *req) {
  work *w = req->data;
  renice_worker(w->cfg);
  if (user_over_share(w)) {
    refuse_over_share(w);
    return;
  }
  vl_error err;
  vl_error_clear(&err);
  size_t json_len = w->frame.json_len;
  vl_status s = w->parsed ? VL_OK : parse_within_budget(w, &err);
  if (s == VL_OK && where_of(w->method) == RUN_LOOP) {
    vl_frame_free(&w->frame);
    return;
  }
  serve(w, s, &err, true);
  if (json_len >= TRIM_AFTER_JSON) {
    /* Its tree (~100 bytes per value) is freed into glibc's fast bins, which stay resident
     * and are not coalesced; the next large frames (fresh maps) would add to them. Giving the
     * pages back costs a walk of the heap, small next to parsing this much JSON. */
    vld_mem_trim();
  }
}

/* ---- event loop ------------------------------------------------------------------------- */

static void run_on_loop(work *w) {
  vl_frame_free(&w->frame);
  cJSON *result = w->d->stats_result(w->d->owner); /* the one daemon method */
  if (result != NULL) {
    respond_result(w, result);
  } else {
    vl_error err;
    vl_error_set(&err, VL_ERR_NOMEM, "", "cannot build the %s result",
                 vld_dispatch_method_name((size_t)w->method));
    respond_error(w, &err);
  }
  vl__rpc_request_free(&w->rpc);
}

/* Counts the answered request, queues its response and frees w. */
static void complete(work *w) {
  vld_conn *c = w->conn;
  vld_stats *st = w->d->stats;
  uint64_t elapsed = uv_hrtime() - w->start_ns;
  uv_mutex_lock(w->d->mu);
  vld_stats_record(st, w->method, w->status != VL_OK, elapsed);
  st->served_on_loop += w->served_on_loop;
  st->shed[VLD_SHED_MEMORY] += w->over_memory;
  st->shed[VLD_SHED_UID_MEMORY] += w->over_share;
  st->views_replaced += w->call.views_replaced;
  /* A client controls bytes_saved (huge dynamic upper bounds): saturate, never overflow. */
  if (__builtin_add_overflow(st->bytes_saved, w->call.bytes_saved, &st->bytes_saved)) {
    st->bytes_saved = INT64_MAX;
  }
  uv_mutex_unlock(w->d->mu);
  vld_log_debug("conn %llu: %s -> %s in %.3f ms", (unsigned long long)c->serial,
                w->method >= 0 ? vld_dispatch_method_name((size_t)w->method) : "(invalid)",
                vl_status_kind(w->status), (double)elapsed / 1e6);
  vld_conn_send_owned(c, w->json, w->json_len, w->json_static, &w->payload, w->payload_owner);
  free(w);
}

/* Work cancelled before it started (its connection closed): nobody is there to answer. */
static void drop_cancelled(work *w) {
  uv_mutex_lock(w->d->mu);
  w->d->stats->cancelled++;
  uv_mutex_unlock(w->d->mu);
  vl_frame_free(&w->frame);
  vl__rpc_request_free(&w->rpc);
  free(w);
}

/* Work the drain timeout took off the queue before it started: its client is still there, so it
 * gets -32007 (docs/protocol.md: every accepted request gets exactly one response). Nothing ran on
 * the pool, so the frame is intact for finding the id when the loop did not parse it. */
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

/* Work done, cancelled, or taken off its lane unstarted (fair_pump, with UV_ECANCELED):
 * answered, or dropped. */
static void finish(work *w, int status) {
  vld_conn *c = w->conn;
  vld_dispatcher *d = w->d;
  if (!w->waiting) {
    d->submitted--;
  }
  w->waiting = false;
  unlink_work(w);
  d->inflight--;
  uv_mutex_lock(d->mu);
  (*d->pool_queued)--;
  vld_uid_use *u = w->uid_counted ? vld_shares_find(d->shares, c->uid) : NULL;
  if (u != NULL) {
    u->queued--;
    vld_shares_forget(d->shares, u);
  }
  uv_mutex_unlock(d->mu);
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
  vld_conn_release(c);
}

static void fair_pump(vld_dispatcher *d);

static void after_work(uv_work_t *req, int status) {
  vld_dispatcher *d = ((work *)req->data)->d;
  finish(req->data, status);
  fair_pump(d); /* the lanes' next work takes the place */
}

/* ---- the lanes: fair turns on the pool ----------------------------------------------------
 * libuv's pool runs its queue in order, so a user with 96 large executes queued stood before
 * another user's small one: it waited 13-31 s (found by a red-team pass). Each loop therefore
 * hands the pool at most --workers requests at a time (d->submitted), enough to keep every
 * worker busy; the others wait in lanes, one per user with waiting work, FIFO within a lane,
 * and the lanes take turns (the lane served goes to the back). So a request waits behind at
 * most --workers requests of each loop already handed over, and one from each other user's
 * lane before it, not behind everything queued. Work whose connection closes while it waits is
 * taken out of its lane and dropped at once (lanes_drop); work whose drain timed out is answered
 * -32007 when its turn comes (a lane has waiting work only while this loop's --workers requests
 * are on the pool, so a turn always comes). */
typedef struct vld_lane {
  uid_t uid;
  work *head, *tail;
  struct vld_lane *next;
} vld_lane;

static void submit(work *w) {
  w->d->submitted++;
  /* uv_queue_work fails only for a NULL work callback. */
  uv_queue_work(w->d->loop, &w->req, run_work, after_work);
}

/* Queues w for the pool: in its user's lane (at the back), or handed over at once when the
 * pool has room for this loop and nothing waits. */
static void fair_enqueue(work *w) {
  vld_dispatcher *d = w->d;
  if (d->submitted < d->cfg->workers && d->lanes == NULL) {
    submit(w);
    return;
  }
  vld_lane **at = &d->lanes;
  while (*at != NULL && (*at)->uid != w->conn->uid) {
    at = &(*at)->next;
  }
  vld_lane *l = *at;
  if (l == NULL) {
    l = calloc(1, sizeof *l);
    if (l == NULL) {
      submit(w); /* out of memory for a lane: in the pool's order, as before the lanes */
      return;
    }
    l->uid = w->conn->uid;
    *at = l;
  }
  w->waiting = true;
  w->lane_next = NULL;
  if (l->tail != NULL) {
    l->tail->lane_next = w;
  } else {
    l->head = w;
  }
  l->tail = w;
}

/* While the pool has room for this loop, hands it the first lane's next work and sends that
 * lane to the back (or frees it, emptied); expired work is answered on the way. */
static void fair_pump(vld_dispatcher *d) {
  while (d->lanes != NULL && d->submitted < d->cfg->workers) {
    vld_lane *l = d->lanes;
    work *w = l->head;
    l->head = w->lane_next;
    d->lanes = l->next;
    if (l->head == NULL) {
      free(l);
    } else {
      l->next = NULL;
      vld_lane **end = &d->lanes;
      while (*end != NULL) {
        end = &(*end)->next;
      }
      *end = l;
    }
    if (w->expired) {
      finish(w, UV_ECANCELED); /* never ran: -32007 after a drain timeout */
    } else {
      w->waiting = false;
      submit(w);
    }
  }
}

/* Takes c's waiting work out of the lanes (one pass over them) and drops it unanswered: c is
 * closing, and the frames it holds go back to the budget now, not when their turn comes. */
static void lanes_drop(vld_dispatcher *d, vld_conn *c) {
  work *dropped = NULL;
  for (vld_lane **at = &d->lanes; *at != NULL;) {
    vld_lane *l = *at;
    work **x = &l->head;
    l->tail = NULL;
    while (*x != NULL) {
      work *w = *x;
      if (w->conn == c) {
        *x = w->lane_next;
        w->lane_next = dropped;
        dropped = w;
      } else {
        l->tail = w;
        x = &w->lane_next;
      }
    }
    if (l->head == NULL) {
      *at = l->next;
      free(l);
    } else {
      at = &l->next;
    }
  }
  while (dropped != NULL) {
    work *w = dropped;
    dropped = w->lane_next;
    finish(w, UV_ECANCELED); /* c is closing: counted as cancelled, never answered */
  }
}

void vld_dispatch_cancel(vld_conn *c) {
  if (c->user != NULL) {
    lanes_drop(((work *)c->user)->d, c);
  }
  for (work *w = c->user; w != NULL; w = w->next) {
    /* Fails (UV_EBUSY) for work already running or done; that is answered as usual. */
    uv_cancel((uv_req_t *)&w->req);
  }
}

void vld_dispatch_expire(vld_conn *c) {
  for (work *w = c->user; w != NULL; w = w->next) {
    w->expired = true;
    if (!w->waiting) {
      uv_cancel((uv_req_t *)&w->req); /* running work (UV_EBUSY) finishes and is answered */
    }
  }
}

/* May c queue one more request on the pool? Not past --max-queued for everybody, nor, while
 * another user is connected or has work, past --max-queued-per-uid for its user: one user
 * alone may use the whole queue, but cannot keep the others out of it. Under *d->mu. */
static bool pool_full_locked(const vld_dispatcher *d, const vld_conn *c) {
  if (*d->pool_queued >= d->cfg->max_queued) {
    return true;
  }
  const vld_uid_use *u = d->shares->n > 1 ? vld_shares_peek(d->shares, c->uid) : NULL;
  return u != NULL && u->queued >= d->cfg->max_queued_per_uid;
}

static bool pool_full(const vld_dispatcher *d, const vld_conn *c) {
  uv_mutex_lock(d->mu);
  bool full = pool_full_locked(d, c);
  uv_mutex_unlock(d->mu);
  return full;
}

/* Takes a place on the pool for w unless the pool is full for its user (pool_full), in one
 * step under the lock, so that loops deciding at once never pass --max-queued together. */
static bool reserve_pool(work *w) {
  vld_dispatcher *d = w->d;
  uv_mutex_lock(d->mu);
  bool full = pool_full_locked(d, w->conn);
  if (!full) {
    (*d->pool_queued)++;
    vld_uid_use *u = vld_shares_find(d->shares, w->conn->uid);
    w->uid_counted = u != NULL;
    if (u != NULL) {
      u->queued++;
    }
  }
  uv_mutex_unlock(d->mu);
  return !full;
}

/* Answers -32005 at once, on the loop, and frees w; the connection stays usable. */
static void respond_overloaded(work *w) {
  vld_dispatcher *d = w->d;
  vl_error err;
  uv_mutex_lock(d->mu);
  uint32_t queued = *d->pool_queued;
  bool all = queued >= d->cfg->max_queued;
  d->stats->shed[all ? VLD_SHED_QUEUE : VLD_SHED_UID]++;
  uv_mutex_unlock(d->mu);
  if (all) {
    vl_error_set(&err, VL_ERR_OVERLOADED, "",
                 "overloaded: %u requests are queued or running (--max-queued %u); retry later",
                 queued, d->cfg->max_queued);
  } else {
    vl_error_set(&err, VL_ERR_OVERLOADED, "",
                 "overloaded: uid %u has %u requests queued or running while other users are "
                 "connected (--max-queued-per-uid); retry later",
                 (unsigned)w->conn->uid, d->cfg->max_queued_per_uid);
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

/* Heavy methods whose work is bounded by their graph alone (no tensor data is made): a small one
 * costs less on the loop than the hand-off to a worker and back (two thread switches, a wake-up
 * of the loop), which was half of the daemon's time for 5-node lowerings. */
static const char *const graph_bound_methods[] = {"validate", "lower"};

/* Is w (parsed on the loop: JSON <= LOOP_PARSE_MAX bytes) a heavy request small enough to run on
 * the loop? A graph-bound method, no payload, at most LOOP_MAX_NODES nodes. Such a lowering
 * takes tens of microseconds (64 nodes: under 0.3 ms here), so the loop's longest stall stays
 * bounded and no client waits behind another's work for longer than that. Or a view_copy that
 * is answered with the request's own bytes (vl__service_lends): its work is reading its small
 * JSON, however large the payload; on a worker at --worker-nice 10 it waited behind other
 * processes for the CPU. */
static bool runs_on_loop(const work *w) {
  if (w->rpc.params == NULL) return false;
  if (w->frame.payload_len > 0) {
    return vl__service_lends(w->rpc.method, w->rpc.params, w->frame.payload, w->frame.payload_len,
                             &w->cfg->limits);
  }
  bool bound = false;
  for (size_t i = 0; i < sizeof graph_bound_methods / sizeof *graph_bound_methods; i++) {
    bound |= strcmp(w->rpc.method, graph_bound_methods[i]) == 0;
  }
  const cJSON *graph = cJSON_GetObjectItemCaseSensitive(w->rpc.params, "graph");
  if (cJSON_IsRaw(graph)) { /* read as text: the scanner counted its nodes */
    return bound && w->rpc.graph_nodes >= 0 && w->rpc.graph_nodes <= LOOP_MAX_NODES;
  }
  const cJSON *nodes = cJSON_IsObject(graph) ? cJSON_GetObjectItemCaseSensitive(graph, "nodes")
                                             : NULL;
  return bound && cJSON_IsArray(nodes) && cJSON_GetArraySize(nodes) <= LOOP_MAX_NODES;
}

/* The loop spends at most LOOP_SPEND_NS of each LOOP_WINDOW_NS on small heavy requests; past
 * that they go to the workers as before. A connection pipelining sixteen of them, or many
 * clients at once, thus never hold the loop for more than the spend plus one request: pings,
 * reads and writes of everybody else wait at most that long. */
static bool loop_has_time(vld_dispatcher *d, uint64_t now) {
  if (now - d->loop_window_ns >= LOOP_WINDOW_NS) {
    d->loop_window_ns = now;
    d->loop_spent_ns = 0;
  }
  return d->loop_spent_ns < LOOP_SPEND_NS;
}

/* A small request parsed on the loop: answered right here unless its method is heavy (or it is
 * a small graph-bound one, runs_on_loop, while the loop has time for it). */
static bool answered_on_loop(work *w) {
  vl_error err;
  vl_error_clear(&err);
  vl_status s = parse(w, true, &err);
  uint64_t t0 = uv_hrtime();
  if (s == VL_OK && where_of(w->method) == RUN_POOL && loop_has_time(w->d, t0) &&
      runs_on_loop(w)) { /* the cheap test first: runs_on_loop may read a view_copy's args */
    vld_dispatcher *d = w->d;
    bool lent = w->frame.payload_len > 0; /* a view_copy answered with its own bytes */
    w->served_on_loop = true;
    serve(w, s, &err, false);
    complete(w);
    d->loop_spent_ns += uv_hrtime() - t0;
    if (lent) {
      /* as after pool work: the daemon's idle second, after which the large blocks it keeps
       * go back to the system (server.c), starts over */
      d->on_queued(d->owner);
    }
    return true;
  }
  if (s == VL_OK && where_of(w->method) == RUN_POOL && pool_full(w->d, w->conn) && w->scanned) {
    /* refused only when the strict reader finds the request valid, as before the scan */
    vl__rpc_request_restore(&w->rpc);
    vl__rpc_request_free(&w->rpc);
    w->scanned = false;
    w->method = -1;
    s = parse(w, false, &err);
  }
  if (s == VL_OK && where_of(w->method) == RUN_POOL) {
    if (!reserve_pool(w)) {
      respond_overloaded(w);
      return true;
    }
    w->parsed = true;
    return false;
  }
  if (s == VL_OK && where_of(w->method) == RUN_LOOP) {
    run_on_loop(w);
  } else {
    serve(w, s, &err, false);
  }
  complete(w);
  return true;
}

void vld_dispatch_frame(vld_dispatcher *d, vld_conn *c, vl_frame *frame) {
  work *w = calloc(1, sizeof *w);
  if (w == NULL) {
    vl_error err;
    vl_error_set(&err, VL_ERR_NOMEM, "", "out of memory");
    vl_frame_free(frame);
    uv_mutex_lock(d->mu);
    vld_stats_record(d->stats, -1, 1, 0);
    uv_mutex_unlock(d->mu);
    vld_conn_send_error(c, &err);
    return;
  }
  w->req.data = w;
  w->d = d;
  w->conn = c;
  w->cfg = d->cfg;
  w->frame = *frame;
  w->start_ns = uv_hrtime();
  w->method = -1;
  if (w->frame.json_len <= LOOP_PARSE_MAX) {
    if (answered_on_loop(w)) {
      return;
    }
  } else if (!reserve_pool(w)) {
    refuse_unparsed(w);
    return;
  }
  fair_enqueue(w);
  link_work(w);
  d->inflight++;
  vld_conn_hold(c);
  d->on_queued(d->owner);
}
