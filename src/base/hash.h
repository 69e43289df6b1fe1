/* hash.h - keyed hashing for the tables that hold names and other strings of a request
 * (internal).
 *
 * An unkeyed hash (FNV-1a) lets an input choose its names so that they all land in one slot:
 * 65,536 node names whose FNV-1a hashes agree in 32 bits took 16 s to validate (each insert
 * probed past every earlier one). SipHash-1-3 under a key per table made from the clock and
 * addresses that ASLR randomises (no system call) leaves no way to choose colliding names
 * without the key.
 * A table's key lives with the table: no global state, and nothing printed depends on it. */
#ifndef VIEWLOWER_HASH_H
#define VIEWLOWER_HASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint64_t k0, k1;
} vl__hash_key;

/* A fresh random key. */
void vl__hash_key_new(vl__hash_key *key);
/* SipHash-1-3 of p[0..n) under key. */
uint64_t vl__hash(const vl__hash_key *key, const void *p, size_t n);

#endif
