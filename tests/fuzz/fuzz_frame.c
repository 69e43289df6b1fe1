/* fuzz_frame.c - libFuzzer harness: the incremental frame decoder over an arbitrary byte
 * stream, fed in arbitrary chunk sizes.
 *
 * Input: 4 bytes seeding the chunk sizes (0..40 bytes, empty feeds included), then the stream.
 * The stream is decoded twice, in one buffer and in chunks; both must yield the same frames
 * and end in the same state (status, idle or not). Every frame must re-encode to exactly the
 * bytes it was decoded from, hold a NUL after its JSON and an 8-byte aligned payload. The
 * frame limit is small (64 KiB), so lengths over it must fail before any allocation. Each
 * frame's JSON is then read as the daemon reads it: scanned (vl__rpc_request_scan, whose graph
 * borrows the text) and strictly; a scanned request is one the strict reader finds valid with
 * the same method, id and members, or one whose graph text is no JSON value (the scan leaves
 * it to the graph parser), and the text is whole again after the scan's restore. */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "viewlower/frame.h"
#include "base/json_util.h"
#include "wire/envelope.h"

#define MAX_FRAME ((uint64_t)64 << 10)
#define MAX_FRAMES 4096

typedef struct {
  vl_frame frames[MAX_FRAMES];
  size_t count;
  vl_status status;
  bool idle;
  size_t consumed; /* stream bytes consumed up to the end of the last frame */
} decoded;

static uint32_t next_chunk(uint32_t *state) {
  *state = *state * 1664525u + 1013904223u;
  return (*state >> 16) % 41u;
}

/* Checks one finished frame against the stream bytes it came from. */
static void check_frame(const vl_frame *f, const uint8_t *stream, size_t end) {
  size_t total = VL_FRAME_HEADER_SIZE + f->json_len + f->payload_len;
  FUZZ_CHECK(end >= total);
  const uint8_t *start = stream + end - total;
  uint8_t hdr[VL_FRAME_HEADER_SIZE];
  vl_frame_header_encode(hdr, (uint32_t)f->json_len, f->payload_len);
  FUZZ_CHECK(memcmp(hdr, start, VL_FRAME_HEADER_SIZE) == 0);
  FUZZ_CHECK(f->json[f->json_len] == '\0');
  FUZZ_CHECK(f->json_len == 0 || memcmp(f->json, start + VL_FRAME_HEADER_SIZE, f->json_len) == 0);
  FUZZ_CHECK((f->payload == NULL) == (f->payload_len == 0));
  FUZZ_CHECK(f->payload == NULL || (uintptr_t)f->payload % 8 == 0);
  FUZZ_CHECK(f->payload_len == 0 ||
             memcmp(f->payload, start + VL_FRAME_HEADER_SIZE + f->json_len, f->payload_len) == 0);
  FUZZ_CHECK(f->json_len + f->payload_len <= MAX_FRAME);
}

/* Decodes stream in chunks (chunk_seed 0: one buffer), collecting frames into out. */
static void decode(const uint8_t *stream, size_t len, uint32_t chunk_seed, decoded *out) {
  vl_frame_decoder d;
  vl_frame_decoder_init(&d, MAX_FRAME);
  memset(out, 0, sizeof *out);
  size_t at = 0;
  vl_status st = VL_OK;
  while (at < len && st == VL_OK && out->count < MAX_FRAMES) {
    size_t chunk = chunk_seed ? next_chunk(&chunk_seed) : len - at;
    chunk = chunk < len - at ? chunk : len - at;
    size_t off = 0;
    do {
      size_t used = 0;
      bool ready = false;
      vl_frame f = {0};
      vl_error err;
      vl_error_clear(&err);
      st = vl_frame_decoder_feed(&d, stream + at + off, chunk - off, &used, &ready, &f, &err);
      FUZZ_CHECK(used <= chunk - off);
      off += used;
      if (st != VL_OK) {
        fuzz_check_error(st, &err);
        FUZZ_CHECK(!ready);
      } else if (ready) {
        check_frame(&f, stream, at + off);
        out->consumed = at + off;
        out->frames[out->count++] = f;
      } else {
        FUZZ_CHECK(off == chunk); /* not ready: the whole chunk was taken */
      }
      if (ready && out->count == MAX_FRAMES) break;
    } while (st == VL_OK && off < chunk);
    at += off;
  }
  out->status = st;
  out->idle = vl_frame_decoder_idle(&d);
  if (st != VL_OK) {
    /* A failed decoder reports the same failure again. */
    size_t used = 1;
    bool ready = true;
    vl_frame f = {0};
    vl_error err;
    FUZZ_CHECK(vl_frame_decoder_feed(&d, stream, len, &used, &ready, &f, &err) == st);
    FUZZ_CHECK(used == 0 && !ready);
  }
  vl_frame_decoder_free(&d);
}

static void release(decoded *d) {
  for (size_t i = 0; i < d->count; i++) vl_frame_free(&d->frames[i]);
}

static bool same_frame(const vl_frame *a, const vl_frame *b) {
  return a->json_len == b->json_len && a->payload_len == b->payload_len &&
         memcmp(a->json, b->json, a->json_len) == 0 &&
         (a->payload_len == 0 || memcmp(a->payload, b->payload, a->payload_len) == 0);
}

/* The scan of a copy of the frame's JSON against the strict reader of the original. */
static void check_envelope(const vl_frame *f) {
  static char text[MAX_FRAME + 1];
  memcpy(text, f->json, f->json_len + 1);
  vl__rpc_request scanned, strict;
  vl_error err;
  bool read = vl__rpc_request_scan(text, f->json_len, &scanned);
  vl_status st = vl__rpc_request_parse(f->json, f->json_len, &strict, &err);
  const cJSON *graph = read ? cJSON_GetObjectItemCaseSensitive(scanned.params, "graph") : NULL;
  if (read && st != VL_OK) {
    /* the scan steps over the graph's text unchecked (its parser reads it when the method
     * runs, and the daemon reads a request whose call fails again, strictly): only a graph
     * that is no JSON value of its own may hide the strict reader's error */
    FUZZ_CHECK(cJSON_IsRaw(graph));
    FUZZ_CHECK(!vl__rpc_request_graph_checked(&scanned)); /* the daemon reads it again */
    cJSON *tree = NULL;
    size_t at = 0;
    FUZZ_CHECK(vl__json_parse_one(graph->valuestring, strlen(graph->valuestring), false, &tree,
                                  &at) != VL__JSON_OK);
    cJSON_Delete(tree);
    vl__rpc_request_restore(&scanned);
  } else if (read) {
    FUZZ_CHECK(vl__rpc_request_graph_checked(&scanned)); /* nothing for a second reading */
    FUZZ_CHECK(strcmp(scanned.method, strict.method) == 0);
    char *a = scanned.id != NULL ? cJSON_PrintUnformatted(scanned.id) : NULL;
    char *b = strict.id != NULL ? cJSON_PrintUnformatted(strict.id) : NULL;
    FUZZ_CHECK((a == NULL) == (b == NULL) && (a == NULL || strcmp(a, b) == 0));
    cJSON_free(a);
    cJSON_free(b);
    for (const cJSON *m = strict.params != NULL ? strict.params->child : NULL; m; m = m->next) {
      const cJSON *o = cJSON_GetObjectItemCaseSensitive(scanned.params, m->string);
      FUZZ_CHECK(o != NULL);
      if (strcmp(m->string, "graph") != 0) {
        /* printed, not cJSON_Compare, which matches duplicate keys to the first of the name */
        char *x = cJSON_PrintUnformatted(m), *y = cJSON_PrintUnformatted(o);
        FUZZ_CHECK(x != NULL && y != NULL && strcmp(x, y) == 0);
        cJSON_free(x);
        cJSON_free(y);
      } else if (cJSON_IsRaw(o)) { /* the graph's own text, borrowed, and terminated */
        FUZZ_CHECK(o->valuestring > text && o->valuestring < text + f->json_len);
        FUZZ_CHECK(o->valuestring[0] == '{');
      }
    }
    vl__rpc_request_restore(&scanned);
  } else {
    FUZZ_CHECK(scanned.doc == NULL);
  }
  FUZZ_CHECK(memcmp(text, f->json, f->json_len + 1) == 0);
  vl__rpc_request_free(&scanned);
  vl__rpc_request_free(&strict);
}

static decoded whole, chunked;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4) return 0;
  uint32_t seed = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
                  (uint32_t)data[3] << 24;
  decode(data + 4, size - 4, 0, &whole);
  decode(data + 4, size - 4, seed | 1u, &chunked);
  FUZZ_CHECK(whole.count == chunked.count);
  for (size_t i = 0; i < whole.count; i++) {
    FUZZ_CHECK(same_frame(&whole.frames[i], &chunked.frames[i]));
    check_envelope(&whole.frames[i]);
  }
  FUZZ_CHECK(whole.count == MAX_FRAMES ||
             (whole.status == chunked.status && whole.idle == chunked.idle));
  FUZZ_CHECK(whole.consumed == chunked.consumed);
  release(&whole);
  release(&chunked);
  return 0;
}
