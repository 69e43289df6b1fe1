/* lines.c - zero-filled aligned blocks (base/lines.h). */
#include "base/lines.h"

#include <stdint.h>
#include <stdlib.h>

void *vl__lines_calloc(size_t nbytes, size_t align) {
  size_t room = align + sizeof(void *); /* the saved start and the move up to align */
  if (align < sizeof(void *) || (align & (align - 1)) != 0 || nbytes > SIZE_MAX - room) {
    return NULL;
  }
  char *base = calloc(nbytes + room, 1);
  if (base == NULL) return NULL;
  /* the first multiple of align past room for the saved start */
  uintptr_t at = ((uintptr_t)base + sizeof(void *) + align - 1) & ~(uintptr_t)(align - 1);
  void **p = (void **)at;
  p[-1] = base;
  return p;
}

void vl__lines_free(void *p) {
  if (p != NULL) free(((void **)p)[-1]);
}
