/* store.h - the memory of one graph (internal): an arena for its strings, argument arrays and
 * spec arrays, interned strings (targets, kwarg keys, string literals) and interned specs, and
 * one pool for every node's users.
 *
 * Invariants: nothing allocated here is freed alone; vl__store_free releases all of it at once.
 * Interned strings and specs are shared and read-only; two equal requests give one pointer.
 * Everything is bounded by what the caller asks for (the parser checks its limits first). */
#ifndef VIEWLOWER_STORE_H
#define VIEWLOWER_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "viewlower/tensor.h"

typedef struct vl__store vl__store;

/* An empty store; NULL when out of memory. */
vl__store *vl__store_new(void);
void vl__store_free(vl__store *s);

/* n bytes aligned for any field of the model (8), uninitialized; NULL when out of memory. */
void *vl__store_alloc(vl__store *s, size_t n);
/* count * size zeroed bytes (the product overflow-checked); NULL when out of memory. */
void *vl__store_calloc(vl__store *s, size_t count, size_t size);
/* A NUL-terminated copy of p[0..n) (which holds no NUL); NULL when out of memory. */
const char *vl__store_str(vl__store *s, const char *p, size_t n);
/* The same as an interned string: equal texts give one pointer. */
const char *vl__store_intern(vl__store *s, const char *p, size_t n);
/* spec interned (only its first rank sizes and dim order entries count; the copy is zero past
 * them); NULL when out of memory. */
const vl_spec *vl__store_spec(vl__store *s, const vl_spec *spec);
/* The store's hash of p[0..n): SipHash under a random key of this store (base/hash.h), for
 * tables of what an input names, whose collisions no input can then choose. */
uint64_t vl__store_hash(const vl__store *s, const void *p, size_t n);
/* Room for n users (the old content is not kept); NULL when out of memory. */
uint32_t *vl__store_users(vl__store *s, size_t n);

/* The val of a node without one: every field zero. */
extern const vl_spec vl__spec_none;

#endif
