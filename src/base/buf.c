/* buf.c - a growable byte buffer (binary frame payloads, encoded output).
 *
 * Invariants: len <= cap; data is NULL only while cap is 0; a zero-initialized vl_buf is an
 * empty buffer. Growth doubles the capacity (at least 64 bytes) with every size computation
 * overflow-checked; a failed growth leaves the buffer exactly as it was. */
#include "viewlower/buf.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { BUF_MIN_CAP = 64 };

/* Ensures cap >= need and data != NULL; false (buffer unchanged) when memory runs out. */
static bool buf_reserve(vl_buf *b, size_t need) {
  if (b->data != NULL && need <= b->cap) {
    return true;
  }
  size_t cap = b->cap < BUF_MIN_CAP ? BUF_MIN_CAP : b->cap;
  while (cap < need) {
    if (cap > SIZE_MAX / 2) {
      cap = need; /* doubling would overflow: take exactly what is needed */
      break;
    }
    cap *= 2;
  }
  uint8_t *p = realloc(b->data, cap);
  if (p == NULL) {
    return false;
  }
  b->data = p;
  b->cap = cap;
  return true;
}

void *vl_buf_extend(vl_buf *b, size_t n) {
  if (n > SIZE_MAX - b->len || !buf_reserve(b, b->len + n)) {
    return NULL;
  }
  void *tail = b->data + b->len;
  b->len += n;
  return tail;
}

vl_status vl_buf_append(vl_buf *b, const void *p, size_t n) {
  void *tail = vl_buf_extend(b, n);
  if (tail == NULL) {
    return VL_ERR_NOMEM;
  }
  if (n > 0) {
    memcpy(tail, p, n);
  }
  return VL_OK;
}

void vl_buf_free(vl_buf *b) {
  if (b == NULL) {
    return;
  }
  free(b->data);
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
}
