/* frame.c - wire frame header codec and the incremental frame decoder (docs/protocol.md, "Frames").
 *
 * Invariants of the decoder: while header_got < 16 nothing is allocated; once the header is
 * complete and its sizes pass the limit, exactly one body block is allocated and filled; a
 * finished frame is handed to the caller and the decoder returns to its empty state. */
#include "viewlower/frame.h"

#include <stdlib.h>
#include <string.h>

void vl_frame_header_encode(uint8_t out[VL_FRAME_HEADER_SIZE], uint32_t json_len,
                            uint64_t payload_len) {
  memcpy(out, VL_FRAME_MAGIC, 4);
  for (int i = 0; i < 4; i++) {
    out[4 + i] = (uint8_t)(json_len >> (24 - 8 * i));
  }
  for (int i = 0; i < 8; i++) {
    out[8 + i] = (uint8_t)(payload_len >> (56 - 8 * i));
  }
}

vl_status vl_frame_header_decode(const uint8_t in[VL_FRAME_HEADER_SIZE], vl_frame_header *out,
                                 vl_error *err) {
  if (memcmp(in, VL_FRAME_MAGIC, 4) != 0) {
    return vl_error_set(err, VL_ERR_PROTOCOL, "",
                        "bad frame magic %02x %02x %02x %02x (expected \"VLW1\")", in[0], in[1],
                        in[2], in[3]);
  }
  uint32_t json_len = 0;
  uint64_t payload_len = 0;
  for (int i = 0; i < 4; i++) {
    json_len = (json_len << 8) | in[4 + i];
  }
  for (int i = 0; i < 8; i++) {
    payload_len = (payload_len << 8) | in[8 + i];
  }
  out->json_len = json_len;
  out->payload_len = payload_len;
  return VL_OK;
}

vl_status vl_frame_check_size(const vl_frame_header *h, uint64_t max_frame_bytes, vl_error *err) {
  /* json_len + payload_len is never computed before both are known to be below the bound. */
  if (h->json_len > max_frame_bytes) {
    return vl_error_set(err, VL_ERR_TOO_LARGE, "",
                        "frame JSON length %u exceeds the frame limit of %llu bytes",
                        (unsigned)h->json_len, (unsigned long long)max_frame_bytes);
  }
  if (h->payload_len > max_frame_bytes - h->json_len) {
    return vl_error_set(err, VL_ERR_TOO_LARGE, "",
                        "frame of %u JSON bytes and %llu payload bytes exceeds the frame limit "
                        "of %llu bytes",
                        (unsigned)h->json_len, (unsigned long long)h->payload_len,
                        (unsigned long long)max_frame_bytes);
  }
  /* The body block also holds a NUL and up to 7 bytes of alignment padding. */
  if ((uint64_t)h->json_len + h->payload_len > (uint64_t)SIZE_MAX - 8) {
    return vl_error_set(err, VL_ERR_TOO_LARGE, "", "frame does not fit in memory");
  }
  return VL_OK;
}

void vl_frame_free(vl_frame *f) {
  if (f == NULL) {
    return;
  }
  free(f->json);
  memset(f, 0, sizeof *f);
}

void vl_frame_decoder_init(vl_frame_decoder *d, uint64_t max_frame_bytes) {
  memset(d, 0, sizeof *d);
  d->max_frame_bytes = max_frame_bytes;
  d->failed = VL_OK;
}

/* Offset of the payload inside the body block: after the JSON and its NUL, 8-byte aligned. */
static size_t payload_offset(uint32_t json_len) {
  return ((size_t)json_len + 1 + 7) & ~(size_t)7;
}

static vl_status fail(vl_frame_decoder *d, vl_status s) {
  d->failed = s;
  free(d->body);
  d->body = NULL;
  return s;
}

/* The header just completed: decode, check, allocate the body block. */
static vl_status start_body(vl_frame_decoder *d, vl_error *err) {
  vl_status s = vl_frame_header_decode(d->header, &d->hdr, err);
  if (s == VL_OK) {
    s = vl_frame_check_size(&d->hdr, d->max_frame_bytes, err);
  }
  if (s != VL_OK) {
    return fail(d, s);
  }
  size_t json_len = d->hdr.json_len;
  size_t payload_len = (size_t)d->hdr.payload_len;
  vl_frame_admission a = d->admit != NULL
                             ? d->admit(d->admit_ctx, (uint64_t)json_len + (uint64_t)payload_len)
                             : VL_FRAME_ADMIT;
  if (a == VL_FRAME_WAIT) {
    return VL_OK; /* body stays NULL: asked again at the next feed */
  }
  if (a == VL_FRAME_REFUSE) {
    return fail(d, vl_error_set(err, VL_ERR_OVERLOADED, "",
                                "overloaded: a frame of %zu bytes does not fit the memory budget",
                                json_len + payload_len));
  }
  d->body = malloc(payload_offset(d->hdr.json_len) + payload_len);
  if (d->body == NULL) {
    return fail(d, vl_error_set(err, VL_ERR_NOMEM, "", "cannot allocate a frame of %zu bytes",
                                json_len + payload_len));
  }
  d->body_len = json_len + payload_len;
  d->body_got = 0;
  return VL_OK;
}

/* Copies body bytes, JSON first, then payload at its aligned offset. Returns bytes used. */
static size_t fill_body(vl_frame_decoder *d, const uint8_t *data, size_t len) {
  size_t used = 0;
  size_t json_len = d->hdr.json_len;
  if (d->body_got < json_len) {
    size_t n = json_len - d->body_got;
    n = n < len ? n : len;
    if (n > 0) {
      memcpy(d->body + d->body_got, data, n);
    }
    d->body_got += n;
    used = n;
  }
  size_t want = d->body_len - d->body_got;
  size_t n = len - used < want ? len - used : want;
  if (n > 0) {
    size_t at = payload_offset(d->hdr.json_len) + (d->body_got - json_len);
    memcpy(d->body + at, data + used, n);
    d->body_got += n;
    used += n;
  }
  return used;
}

/* Hands the completed body to out and returns the decoder to its empty state. */
static void finish(vl_frame_decoder *d, vl_frame *out) {
  size_t json_len = d->hdr.json_len;
  size_t payload_len = (size_t)d->hdr.payload_len;
  d->body[json_len] = 0;
  out->json = (char *)d->body;
  out->json_len = json_len;
  out->payload = payload_len > 0 ? d->body + payload_offset(d->hdr.json_len) : NULL;
  out->payload_len = payload_len;
  d->body = NULL;
  d->body_len = 0;
  d->body_got = 0;
  d->header_got = 0;
}

vl_status vl_frame_decoder_feed(vl_frame_decoder *d, const uint8_t *data, size_t len,
                                size_t *consumed, bool *ready, vl_frame *out, vl_error *err) {
  *consumed = 0;
  *ready = false;
  if (d->failed != VL_OK) {
    return vl_error_set(err, d->failed, "", "the connection's frame stream is already broken");
  }
  size_t used = 0;
  if (d->header_got < VL_FRAME_HEADER_SIZE) {
    size_t n = VL_FRAME_HEADER_SIZE - d->header_got;
    n = n < len ? n : len;
    if (n > 0) {
      memcpy(d->header + d->header_got, data, n);
    }
    d->header_got += n;
    used = n;
    *consumed = used;
    if (d->header_got < VL_FRAME_HEADER_SIZE) {
      return VL_OK;
    }
  }
  if (d->body == NULL) {
    vl_status s = start_body(d, err);
    if (s != VL_OK) {
      return s;
    }
    if (d->body == NULL) {
      return VL_OK; /* waiting for admission */
    }
  }
  used += fill_body(d, data + used, len - used);
  *consumed = used;
  if (d->body_got == d->body_len) {
    finish(d, out);
    *ready = true;
  }
  return VL_OK;
}

uint8_t *vl_frame_decoder_direct(vl_frame_decoder *d, size_t *len) {
  size_t json_len = d->hdr.json_len;
  *len = 0;
  if (d->failed != VL_OK || d->body == NULL || d->body_got < json_len ||
      d->body_got >= d->body_len) {
    return NULL;
  }
  *len = d->body_len - d->body_got;
  return d->body + payload_offset(d->hdr.json_len) + (d->body_got - json_len);
}

void vl_frame_decoder_commit(vl_frame_decoder *d, size_t n, bool *ready, vl_frame *out) {
  size_t room = 0;
  *ready = false;
  if (vl_frame_decoder_direct(d, &room) == NULL || n == 0) {
    return;
  }
  d->body_got += n < room ? n : room;
  if (d->body_got == d->body_len) {
    finish(d, out);
    *ready = true;
  }
}

bool vl_frame_decoder_waiting(const vl_frame_decoder *d) {
  return d->failed == VL_OK && d->header_got == VL_FRAME_HEADER_SIZE && d->body == NULL;
}

bool vl_frame_decoder_idle(const vl_frame_decoder *d) {
  return d->header_got == 0 && d->failed == VL_OK;
}

void vl_frame_decoder_free(vl_frame_decoder *d) {
  if (d == NULL) {
    return;
  }
  free(d->body);
  d->body = NULL;
  d->body_len = 0;
  d->body_got = 0;
  d->header_got = 0;
}
