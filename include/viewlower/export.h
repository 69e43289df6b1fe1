/* export.h - symbol visibility for libviewlower and libviewlower-client.
 * The libraries are built with hidden visibility; VL_API marks the public surface. */
#ifndef VIEWLOWER_EXPORT_H
#define VIEWLOWER_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define VL_API __attribute__((visibility("default")))
#else
#define VL_API
#endif

#endif
