/* hash.c - SipHash-1-3 under a per-table random key (base/hash.h). */
#include "base/hash.h"

#include <string.h>
#include <time.h>

static uint64_t rotl(uint64_t x, int b) {
  return (x << b) | (x >> (64 - b));
}

static uint64_t load64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}

#define SIPROUND                                                                                   \
  do {                                                                                             \
    v0 += v1;                                                                                      \
    v1 = rotl(v1, 13);                                                                             \
    v1 ^= v0;                                                                                      \
    v0 = rotl(v0, 32);                                                                             \
    v2 += v3;                                                                                      \
    v3 = rotl(v3, 16);                                                                             \
    v3 ^= v2;                                                                                      \
    v0 += v3;                                                                                      \
    v3 = rotl(v3, 21);                                                                             \
    v3 ^= v0;                                                                                      \
    v2 += v1;                                                                                      \
    v1 = rotl(v1, 17);                                                                             \
    v1 ^= v2;                                                                                      \
    v2 = rotl(v2, 32);                                                                             \
  } while (0)

uint64_t vl__hash(const vl__hash_key *key, const void *p, size_t n) {
  const unsigned char *in = p;
  uint64_t v0 = key->k0 ^ 0x736f6d6570736575ull, v1 = key->k1 ^ 0x646f72616e646f6dull;
  uint64_t v2 = key->k0 ^ 0x6c7967656e657261ull, v3 = key->k1 ^ 0x7465646279746573ull;
  size_t whole = n - n % 8;
  for (size_t i = 0; i < whole; i += 8) {
    uint64_t m = load64(in + i);
    v3 ^= m;
    SIPROUND;
    v0 ^= m;
  }
  uint64_t b = (uint64_t)n << 56;
  for (size_t i = 0; i < n % 8; i++) b |= (uint64_t)in[whole + i] << (8 * i);
  v3 ^= b;
  SIPROUND;
  v0 ^= b;
  v2 ^= 0xff;
  SIPROUND;
  SIPROUND;
  SIPROUND;
  return v0 ^ v1 ^ v2 ^ v3;
}

/* The clock in nanoseconds and two addresses ASLR randomises (the key's, in the heap, and this
 * frame's, on the stack), mixed by SipHash itself: no system call. getrandom per graph cost
 * 2.5-3 µs on the PVM guest the bench runs on, as much as a sixth of a 5-node lowering; the
 * key need only be unknown to whoever chooses the names, who sends them before it exists. */
void vl__hash_key_new(vl__hash_key *key) {
  struct timespec ts = {0, 0};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  vl__hash_key mix = {(uint64_t)(uintptr_t)key, (uint64_t)(uintptr_t)&ts};
  uint64_t seed[2] = {(uint64_t)ts.tv_sec, (uint64_t)ts.tv_nsec};
  key->k0 = vl__hash(&mix, seed, sizeof seed);
  mix.k0 ^= key->k0;
  key->k1 = vl__hash(&mix, seed, sizeof seed);
}
