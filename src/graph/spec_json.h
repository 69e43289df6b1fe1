/* spec_json.h - the one reader of a tensor spec's members (internal; docs/format.md §1, §2).
 *
 * Two parsers meet specs: vl_spec_from_json over a cJSON tree (tensor JSON, the service) and
 * the streaming graph parser over its tape (graph_json.c). Each finds the spec's members its own
 * way and hands them here through a vl__spec_src; every rule of what a spec may say (required
 * dtype and shape, the rank bound, dim_order or strides and never both, dense strides, dynamic,
 * vl_spec_check) is applied once, by vl__spec_read. */
#ifndef VIEWLOWER_SPEC_JSON_H
#define VIEWLOWER_SPEC_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "viewlower/status.h"
#include "viewlower/tensor.h"

/* The members of a spec object, in this order. */
enum { VL__SPEC_DTYPE, VL__SPEC_SHAPE, VL__SPEC_DIM_ORDER, VL__SPEC_STRIDES, VL__SPEC_DYNAMIC,
       VL__SPEC_MEMBERS };

/* A spec object as one parser holds it: member[k] is that parser's handle of member k, NULL when
 * the object has no such member; the functions read a handle (ctx is passed back). */
typedef struct vl__spec_src {
  const void *member[VL__SPEC_MEMBERS];
  void *ctx;
  /* The string at v, NUL-terminated in buf[cap]; false when v is not a string or does not fit. */
  bool (*text)(void *ctx, const void *v, char *buf, size_t cap);
  /* The number of entries of the array v, or -1 when v is not an array. */
  long (*array_len)(void *ctx, const void *v);
  /* At most VL_MAX_RANK whole numbers in [0, max] from the array v into out (*n of them); errors
   * (VL_ERR_INVALID_TENSOR) name path or path/index. */
  vl_status (*ints)(void *ctx, const void *v, int64_t max, const char *path, int64_t *out,
                    size_t *n, vl_error *err);
  /* 1 for true, 0 for false, -1 when v is neither. */
  int (*boolean)(void *ctx, const void *v);
} vl__spec_src;

/* The spec in src (its keys already checked by the caller) into *out. Errors are
 * VL_ERR_INVALID_TENSOR with pointers relative to the spec object ("/shape/2", "/strides"). */
vl_status vl__spec_read(const vl__spec_src *src, vl_spec *out, vl_error *err);

#endif
