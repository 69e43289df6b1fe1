/* lines.h - zero-filled blocks that start on an alignment of the caller's choosing (internal).
 *
 * The interpreter's buffers and a planned graph's arena come from here: calloc gives 16 bytes,
 * so a buffer (or every tensor a plan places at a multiple of 64 inside its arena) began 16 or
 * 48 bytes into a cache line, where the copy kernels' 64-byte blocks split lines (the same
 * cause as the tensors' storage in layout/tensor.c). The block is calloc's, with room to move
 * its start up to the alignment, so large blocks keep calloc's fresh zero pages (no clearing
 * by hand); the start calloc gave is kept just below the aligned one, for vl__lines_free. */
#ifndef VIEWLOWER_LINES_H
#define VIEWLOWER_LINES_H

#include <stddef.h>

/* nbytes (0 allowed) of zeros starting at a multiple of align (a power of two, at least
 * sizeof(void *)); NULL when out of memory or nbytes plus the room overflows. */
void *vl__lines_calloc(size_t nbytes, size_t align);
/* Releases a block of vl__lines_calloc; NULL does nothing. */
void vl__lines_free(void *p);

#endif
