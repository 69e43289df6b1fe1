/* daemon.c - viewlower-bench --daemon SOCKET: the figures of the daemon against in-process and
 * plain-socket baselines, measured in one run on the same cores.
 *
 * lower_small_rps_inprocess: the 5-node graph of viewlower-load's "lower" kind, parsed, lowered
 *   and printed (graph and report) in a loop on one thread per online CPU; requests per second
 *   over all threads. (The socket figure, from viewlower-load with its clients on the same
 *   cores, is added by scripts/bench.sh.)
 * blob_64mib_roundtrip_gbps: a 64 MiB float32 view_copy with the input as a blob and
 *   "encoding": "blob", through the real client library: bytes / round-trip seconds (median).
 *   One dim into one dim moves no byte, so the daemon answers with the request's own bytes
 *   (docs/daemon.md, "view_copy without a copy").
 * blob_64mib_transposed_roundtrip_gbps: the same bytes as a [4096, 4096] float32 stored
 *   transposed (dim order [1, 0]), flattened: the daemon's copy kernel moves every element.
 * socket_echo_gbps: the same client process sends the same 64 MiB through a Unix stream
 *   socket pair to a thread that reads all of it into a buffer it keeps from round to round and
 *   writes it back (store and forward, as the daemon must), and reads it back: bytes /
 *   round-trip seconds (median).
 * ping_p99_us_under_load: the 99th percentile of ping round trips (one connection, one ping at
 *   a time) while two clients lower the 5-node graph back to back and one lowers a 2,000-node
 *   chain back to back: microseconds (and the median, ping_p50_us_under_load). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_daemon.h"
#include "chain.h"
#include "timing.h"
#include "viewlower/client.h"
#include "viewlower/graph.h"
#include "viewlower/lower.h"

/* The same graph as tools/load.c's PE_GRAPH (the "lower" request kind). */
static const char small_graph[] =
    "{\"format\":\"viewlower.graph\",\"version\":1,\"name\":\"patch_embed\",\"nodes\":["
    "{\"name\":\"x\",\"op\":\"placeholder\",\"val\":{\"dtype\":\"float32\",\"shape\":[1,2,2,3]}},"
    "{\"name\":\"x_cl\",\"op\":\"call_function\",\"target\":"
    "\"dim_order_ops._to_dim_order_copy.default\",\"args\":[\"x\"],\"kwargs\":{\"dim_order\":"
    "[0,2,3,1]},\"val\":{\"dtype\":\"float32\",\"shape\":[1,2,2,3],\"dim_order\":[0,2,3,1]}},"
    "{\"name\":\"flat\",\"op\":\"call_function\",\"target\":\"aten.view_copy.default\","
    "\"args\":[\"x_cl\",[1,2,-1]],\"val\":{\"dtype\":\"float32\",\"shape\":[1,2,6]}},"
    "{\"name\":\"tokens\",\"op\":\"call_function\",\"target\":\"aten.permute_copy.default\","
    "\"args\":[\"flat\",[0,2,1]],\"val\":{\"dtype\":\"float32\",\"shape\":[1,6,2]}},"
    "{\"name\":\"out\",\"op\":\"output\",\"args\":[\"tokens\"]}]}";

/* ---- in-process lowering ------------------------------------------------------------------- */

typedef struct lower_worker {
  double seconds;
  uint64_t done;
  bool failed;
} lower_worker;

static void *lower_main(void *arg) {
  lower_worker *w = arg;
  vl_limits lim;
  vl_lower_options o;
  vl_limits_default(&lim);
  vl_lower_options_default(&o);
  double end = now_s() + w->seconds;
  while (now_s() < end) {
    for (int i = 0; i < 64; i++) {
      vl_graph *g = NULL;
      vl_report r;
      vl_error err;
      if (vl_graph_parse(small_graph, sizeof small_graph - 1, &lim, &g, &err) != VL_OK ||
          vl_lower(g, &o, &r, &err) != VL_OK) {
        vl_graph_free(g);
        w->failed = true;
        return NULL;
      }
      char *text = vl_graph_print(g);
      cJSON *rep = vl_report_to_json(&r);
      char *rtext = rep != NULL ? cJSON_PrintUnformatted(rep) : NULL;
      w->failed |= text == NULL || rtext == NULL;
      free(text);
      free(rtext);
      cJSON_Delete(rep);
      vl_report_clear(&r);
      vl_graph_free(g);
      w->done++;
    }
  }
  return NULL;
}

static double lower_inprocess_rps(unsigned threads, double seconds) {
  pthread_t th[64];
  lower_worker w[64];
  unsigned started = 0;
  if (threads > 64) threads = 64;
  double t0 = now_s();
  for (unsigned i = 0; i < threads; i++) {
    w[i] = (lower_worker){.seconds = seconds};
    if (pthread_create(&th[i], NULL, lower_main, &w[i]) == 0) started++;
  }
  uint64_t done = 0;
  bool failed = false;
  for (unsigned i = 0; i < started; i++) {
    pthread_join(th[i], NULL);
    done += w[i].done;
    failed |= w[i].failed;
  }
  double t = now_s() - t0;
  return failed || started == 0 ? -1.0 : (double)done / t;
}

/* ---- 64 MiB blob round trip ----------------------------------------------------------------- */

#define BLOB_BYTES ((size_t)64 << 20)

#define BLOB_SIDE 4096 /* the transposed case: [4096, 4096] float32 */

/* Is out the [BLOB_SIDE, BLOB_SIDE] 4-byte elements of in, transposed? */
static bool is_transpose(const uint8_t *out, const uint8_t *in) {
  for (size_t i = 0; i < BLOB_SIDE; i++) {
    for (size_t j = 0; j < BLOB_SIDE; j++) {
      if (memcmp(out + (i * BLOB_SIDE + j) * 4, in + (j * BLOB_SIDE + i) * 4, 4) != 0) {
        return false;
      }
    }
  }
  return true;
}

/* One round trip; the response payload lands in out, reused from call to call (as the echo's
 * receive buffer is), so neither side pays for first-touch page faults on the client. The
 * output must be the payload's bytes, or with transposed their transpose. */
static double blob_roundtrip_s(vl_client *c, const uint8_t *payload, cJSON *params, bool transposed,
                               vl_buf *out) {
  cJSON *result = NULL;
  vl_error err;
  out->len = 0;
  double t0 = now_s();
  vl_status st = vl_client_view_copy(c, params, payload, BLOB_BYTES, &result, out, &err);
  double t = now_s() - t0;
  bool ok =
      st == VL_OK && out->len == BLOB_BYTES &&
      (transposed ? is_transpose(out->data, payload) : memcmp(out->data, payload, BLOB_BYTES) == 0);
  if (st != VL_OK) fprintf(stderr, "viewlower-bench: view_copy over the socket: %s\n", err.message);
  cJSON_Delete(result);
  return ok ? t : -1.0;
}

/* ---- plain socket echo ------------------------------------------------------------------------
 */

static bool write_all(int fd, const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= (size_t)k;
  }
  return true;
}

static bool read_all(int fd, uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t k = read(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= (size_t)k;
  }
  return true;
}

typedef struct echo {
  int fd;
  int rounds;
  uint8_t *buf;
} echo;

static void *echo_main(void *arg) {
  echo *e = arg;
  for (int i = 0; i < e->rounds; i++)
    if (!read_all(e->fd, e->buf, BLOB_BYTES) || !write_all(e->fd, e->buf, BLOB_BYTES)) break;
  return NULL;
}

/* Median round-trip seconds of rounds echoes, or -1. The echo stores into buf, BLOB_BYTES
 * already touched and reused from call to call, as the daemon reuses its large blocks. */
static double echo_roundtrip_s(const uint8_t *payload, uint8_t *back, uint8_t *buf, int rounds) {
  int sv[2];
  double t[64];
  if (rounds > 64) rounds = 64;
  if (rounds < 1) return -1.0;
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return -1.0;
  echo e = {sv[1], rounds, buf};
  pthread_t th;
  if (pthread_create(&th, NULL, echo_main, &e) != 0) {
    close(sv[0]);
    close(sv[1]);
    return -1.0;
  }
  int done = 0;
  for (; done < rounds; done++) {
    double t0 = now_s();
    if (!write_all(sv[0], payload, BLOB_BYTES) || !read_all(sv[0], back, BLOB_BYTES)) break;
    t[done] = now_s() - t0;
  }
  close(sv[0]);
  pthread_join(th, NULL);
  close(sv[1]);
  return done == rounds ? median(t, rounds) : -1.0;
}

/* The 64 MiB float32 as one dim (transposed false), or as [4096, 4096] stored transposed
 * (dim order [1, 0]), flattened: the copy then moves every element. */
static cJSON *view_copy_params(bool transposed) {
  char text[320];
  if (transposed) {
    snprintf(text, sizeof text,
             "{\"input\":{\"dtype\":\"float32\",\"shape\":[%d,%d],\"dim_order\":[1,0],"
             "\"blob\":{\"offset\":0,\"nbytes\":%zu}},\"size\":[-1],\"encoding\":\"blob\"}",
             BLOB_SIDE, BLOB_SIDE, BLOB_BYTES);
  } else {
    snprintf(
        text, sizeof text,
        "{\"input\":{\"dtype\":\"float32\",\"shape\":[%zu],\"blob\":{\"offset\":0,\"nbytes\":%zu}},"
        "\"size\":[%zu],\"encoding\":\"blob\"}",
        BLOB_BYTES / 4, BLOB_BYTES, BLOB_BYTES / 4);
  }
  return cJSON_Parse(text);
}

/* ---- ping latency under load ----------------------------------------------------------------- */

typedef struct loader {
  const char *socket_path;
  const char *graph; /* JSON text */
  volatile bool *stop;
  long done, failed;
} loader;

/* Lowers l->graph back to back through the text calls (vl_client_send_text, recv_text): the
 * load is the daemon's work, not a tree of each 2,000-node result built in this process on
 * the cores the daemon and the pinging thread share. */
static void *loader_main(void *arg) {
  loader *l = arg;
  vl_client *c = NULL;
  vl_error err;
  size_t n = strlen(l->graph) + 16;
  char *params = malloc(n);
  if (params == NULL || vl_client_connect(l->socket_path, 60000, &c, &err) != VL_OK) {
    free(params);
    l->failed++;
    return NULL;
  }
  int len = snprintf(params, n, "{\"graph\":%s}", l->graph);
  for (uint64_t id = 1; !*l->stop; id++) {
    char *res = NULL;
    size_t res_len = 0;
    uint64_t got = 0;
    vl_status s = vl_client_send_text(c, id, "lower", params, (size_t)len, NULL, 0, &err);
    if (s == VL_OK) s = vl_client_recv_text(c, &got, &res, &res_len, NULL, &err);
    if (s == VL_OK && got == id && res_len > 0 && res[0] == '{') {
      l->done++;
    } else {
      l->failed++;
    }
    free(res);
    if (vl_client_is_transport_error(s)) break;
  }
  vl_client_close(c);
  free(params);
  return NULL;
}

/* p99 of ping round trips in microseconds under the load above; -1 when it cannot run. */
static double ping_p99_under_load_us(const char *socket_path, int pings, long *lowered,
                                     double *p50) {
  /* 2,000 nodes: a placeholder, 1,998 transposes of a [64, 64] float32, the output */
  char *big = vl_bench_chain(1998, "aten.permute_copy.default", ",[1,0]", "[64,64]");
  volatile bool stop = false;
  loader l[3] = {{socket_path, small_graph, &stop, 0, 0},
                 {socket_path, small_graph, &stop, 0, 0},
                 {socket_path, big, &stop, 0, 0}};
  pthread_t th[3];
  int started = 0;
  double *t = malloc((size_t)pings * sizeof *t), p99 = -1.0;
  vl_client *c = NULL;
  vl_error err;
  if (big == NULL || t == NULL || vl_client_connect(socket_path, 60000, &c, &err) != VL_OK) {
    free(big);
    free(t);
    return -1.0;
  }
  for (int i = 0; i < 3; i++) started += pthread_create(&th[i], NULL, loader_main, &l[i]) == 0;
  /* let the load start: the big chain's first lowering is under way */
  for (double until = now_s() + 0.2; now_s() < until;) vl_client_ping(c, &err);
  int n = 0;
  for (; n < pings; n++) {
    double t0 = now_s();
    if (vl_client_ping(c, &err) != VL_OK) break;
    t[n] = (now_s() - t0) * 1e6;
  }
  stop = true;
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  vl_client_close(c);
  *lowered = l[0].done + l[1].done + l[2].done;
  if (n == pings && started == 3 && l[0].failed + l[1].failed + l[2].failed == 0) {
    qsort(t, (size_t)n, sizeof *t, vl_bench_cmp_double);
    p99 = t[(size_t)((double)n * 0.99)];
    *p50 = t[n / 2];
  }
  free(t);
  free(big);
  return p99;
}

cJSON *vl_bench_daemon(const char *socket_path, bool quick) {
  cJSON *o = cJSON_CreateObject();
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  unsigned threads = cpus > 0 ? (unsigned)cpus : 1;
  double rps = lower_inprocess_rps(threads, quick ? 1.0 : 3.0);
  cJSON_AddNumberToObject(o, "lower_small_rps_inprocess", rps);
  cJSON_AddNumberToObject(o, "inprocess_threads", threads);

  uint8_t *payload = malloc(BLOB_BYTES), *back = malloc(BLOB_BYTES), *store = malloc(BLOB_BYTES);
  cJSON *params = view_copy_params(false), *tparams = view_copy_params(true);
  vl_client *c = NULL;
  vl_error err;
  int rounds = quick ? 3 : 9, ok = 0, eok = 0, tok = 0;
  double blob[64], echoes[64], tblob[64];
  if (payload != NULL && back != NULL && store != NULL && params != NULL && tparams != NULL) {
    for (size_t i = 0; i < BLOB_BYTES; i++) payload[i] = (uint8_t)(i * 131 + 7);
    memset(back, 1, BLOB_BYTES);
    memset(store, 2, BLOB_BYTES);
    if (vl_client_connect(socket_path, 60000, &c, &err) == VL_OK) {
      vl_buf out = {NULL, 0, 0};
      /* interleaved: a daemon round trip, an echo, a transposing round trip, rounds times */
      for (int i = 0; i < rounds; i++) {
        double t = blob_roundtrip_s(c, payload, params, false, &out);
        if (t > 0) blob[ok++] = t;
        t = echo_roundtrip_s(payload, back, store, 1);
        if (t > 0) echoes[eok++] = t;
        t = blob_roundtrip_s(c, payload, tparams, true, &out);
        if (t > 0) tblob[tok++] = t;
      }
      vl_buf_free(&out);
      vl_client_close(c);
    } else {
      fprintf(stderr, "viewlower-bench: connect %s: %s\n", socket_path, err.message);
    }
  }
  if (ok > 0)
    cJSON_AddNumberToObject(o, "blob_64mib_roundtrip_gbps",
                            (double)BLOB_BYTES / median(blob, ok) / 1e9);
  else
    cJSON_AddNullToObject(o, "blob_64mib_roundtrip_gbps");
  if (eok > 0)
    cJSON_AddNumberToObject(o, "socket_echo_gbps", (double)BLOB_BYTES / median(echoes, eok) / 1e9);
  else
    cJSON_AddNullToObject(o, "socket_echo_gbps");
  if (tok > 0)
    cJSON_AddNumberToObject(o, "blob_64mib_transposed_roundtrip_gbps",
                            (double)BLOB_BYTES / median(tblob, tok) / 1e9);
  else
    cJSON_AddNullToObject(o, "blob_64mib_transposed_roundtrip_gbps");
  cJSON_AddNumberToObject(o, "blob_repeats", ok);
  long lowered = 0;
  double p50 = -1;
  double p99 = ping_p99_under_load_us(socket_path, quick ? 1000 : 5000, &lowered, &p50);
  if (p99 >= 0) {
    cJSON_AddNumberToObject(o, "ping_p99_us_under_load", p99);
    cJSON_AddNumberToObject(o, "ping_p50_us_under_load", p50);
  } else {
    cJSON_AddNullToObject(o, "ping_p99_us_under_load");
  }
  cJSON_AddNumberToObject(o, "ping_load_lowerings", (double)lowered);
  cJSON_Delete(params);
  cJSON_Delete(tparams);
  free(payload);
  free(back);
  free(store);
  return o;
}
