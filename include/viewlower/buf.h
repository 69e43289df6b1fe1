/* buf.h - a growable byte buffer (used for binary payloads). */
#ifndef VIEWLOWER_BUF_H
#define VIEWLOWER_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "viewlower/export.h"
#include "viewlower/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vl_buf {
  uint8_t *data;
  size_t len;
  size_t cap;
} vl_buf;

/* Appends n bytes; VL_ERR_NOMEM on failure (buf unchanged). */
VL_API vl_status vl_buf_append(vl_buf *b, const void *p, size_t n);
/* Grows capacity to at least len + n and returns a pointer to the n bytes past len (len grows). */
VL_API void *vl_buf_extend(vl_buf *b, size_t n);
VL_API void vl_buf_free(vl_buf *b);

#ifdef __cplusplus
}
#endif
#endif
