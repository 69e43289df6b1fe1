/* frame.h - the wire frame (docs/protocol.md, "Frames"), over memory buffers (no I/O), shared by
 * the daemon and the client.
 *
 * A frame is a 16-byte header (magic "VLW1", JSON length as u32 big-endian, payload length as
 * u64 big-endian), then the JSON text, then the binary payload. The incremental decoder is fed
 * byte chunks of any size and yields whole frames; it never holds more than one frame plus a
 * header, and it checks the sizes against the frame limit before allocating. */
#ifndef VIEWLOWER_FRAME_H
#define VIEWLOWER_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "viewlower/export.h"
#include "viewlower/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VL_FRAME_MAGIC "VLW1"
#define VL_FRAME_HEADER_SIZE 16u
/* Default bound of JSON + payload bytes of one frame (--max-frame-bytes). */
#define VL_FRAME_DEFAULT_MAX_BYTES ((uint64_t)256 << 20)

typedef struct vl_frame_header {
  uint32_t json_len;
  uint64_t payload_len;
} vl_frame_header;

/* A whole frame. json is NUL-terminated (json[json_len] == 0); payload points into the same
 * allocation, 8-byte aligned (NULL when payload_len is 0). Release with vl_frame_free. */
typedef struct vl_frame {
  char *json;
  size_t json_len;
  uint8_t *payload;
  size_t payload_len;
} vl_frame;

/* Writes the 16 header bytes. */
VL_API void vl_frame_header_encode(uint8_t out[VL_FRAME_HEADER_SIZE], uint32_t json_len,
                                   uint64_t payload_len);
/* Reads 16 header bytes; VL_ERR_PROTOCOL when the magic is not "VLW1". */
VL_API vl_status vl_frame_header_decode(const uint8_t in[VL_FRAME_HEADER_SIZE],
                                        vl_frame_header *out, vl_error *err);
/* VL_ERR_TOO_LARGE when json_len + payload_len exceeds max_frame_bytes (no overflow possible)
 * or does not fit this machine's size_t. */
VL_API vl_status vl_frame_check_size(const vl_frame_header *h, uint64_t max_frame_bytes,
                                     vl_error *err);
/* Frees the frame's memory and zeroes it; NULL and empty frames are no-ops. */
VL_API void vl_frame_free(vl_frame *f);

/* Asked before a frame's body (bytes of JSON + payload) is allocated: VL_FRAME_ADMIT to go on,
 * VL_FRAME_WAIT to keep the header and ask again at the next feed (nothing more is consumed
 * meanwhile), VL_FRAME_REFUSE to fail the stream with VL_ERR_OVERLOADED (it can never fit).
 * After VL_FRAME_ADMIT the body is the next block the decoder allocates, on the same thread and
 * before the feed returns (an allocator that counted it ahead can tell it). */
typedef enum { VL_FRAME_ADMIT, VL_FRAME_WAIT, VL_FRAME_REFUSE } vl_frame_admission;
typedef vl_frame_admission (*vl_frame_admit_fn)(void *ctx, uint64_t body_bytes);

typedef struct vl_frame_decoder {
  uint64_t max_frame_bytes;
  vl_frame_admit_fn admit; /* NULL: every frame within max_frame_bytes is admitted */
  void *admit_ctx;
  uint8_t header[VL_FRAME_HEADER_SIZE];
  size_t header_got;
  vl_frame_header hdr;
  uint8_t *body;   /* JSON, NUL, padding, payload: allocated once the header is checked */
  size_t body_len; /* bytes expected from the wire (json_len + payload_len) */
  size_t body_got;
  vl_status failed; /* sticky: once a feed fails, every later feed fails the same way */
} vl_frame_decoder;

VL_API void vl_frame_decoder_init(vl_frame_decoder *d, uint64_t max_frame_bytes);
/* Consumes bytes from data[0..len) until one frame completes or the bytes run out.
 * *consumed is how many bytes were used; when a frame completed, *ready is true and *out owns
 * it (the caller frees it with vl_frame_free), and the caller feeds the rest of the chunk again.
 * Errors: VL_ERR_PROTOCOL (bad magic), VL_ERR_TOO_LARGE (sizes over the limit), VL_ERR_NOMEM,
 * VL_ERR_OVERLOADED (refused by the admission hook);
 * after an error the decoder only reports that error again. */
VL_API vl_status vl_frame_decoder_feed(vl_frame_decoder *d, const uint8_t *data, size_t len,
                                       size_t *consumed, bool *ready, vl_frame *out, vl_error *err);
/* Receiving a payload in place: while a frame's payload is being filled, the address where its
 * next bytes go and, in *len, how many are still missing; NULL (and *len 0) otherwise. A reader
 * may receive up to *len bytes there itself, then report them with vl_frame_decoder_commit
 * instead of feeding them (one copy less). Nothing may be fed in between. */
VL_API uint8_t *vl_frame_decoder_direct(vl_frame_decoder *d, size_t *len);
/* n bytes were written at vl_frame_decoder_direct's address (n is capped at its *len). When
 * that completes the frame, *ready is true and *out owns it, as with vl_frame_decoder_feed. */
VL_API void vl_frame_decoder_commit(vl_frame_decoder *d, size_t n, bool *ready, vl_frame *out);
/* True when a frame's header is in and its admission said to wait (VL_FRAME_WAIT). */
VL_API bool vl_frame_decoder_waiting(const vl_frame_decoder *d);
/* True when no partial frame is buffered (nothing received since the last whole frame). */
VL_API bool vl_frame_decoder_idle(const vl_frame_decoder *d);
/* Releases a partial frame; the decoder may be initialised again afterwards. */
VL_API void vl_frame_decoder_free(vl_frame_decoder *d);

#ifdef __cplusplus
}
#endif
#endif
