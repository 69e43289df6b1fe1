/* store.c - one graph's memory (graph/store.h): a chunked bump arena, two intern tables
 * (strings, specs) and the users pool.
 *
 * Chunks double from 4 KiB up to 1 MiB, so a small graph pays a few KiB and a large one a
 * malloc per MiB instead of one per string or array (no per-allocation headers or rounding).
 * A request larger than a quarter chunk gets a chunk of its own, kept behind the current one
 * so the current chunk's room is not lost. Intern tables are open addressing, at most half
 * full, a 32-bit hash beside the pointer. The hash is SipHash under an unguessable key per store
 * (base/hash.h): with a fixed hash (FNV-1a) an input could choose strings or shapes that all
 * land in one slot and make every insert probe past every earlier one. */
#include "graph/store.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"

enum { CHUNK_MIN = 4096, CHUNK_MAX = 1 << 20, ALIGN = 8 };

const vl_spec vl__spec_none;

typedef struct chunk {
  struct chunk *next;
  size_t cap, used;
  max_align_t data[];
} chunk;

typedef struct {
  const void *p; /* NULL: empty */
  uint32_t hash;
  uint32_t len; /* strings: the length; specs: unused */
} slot;

typedef struct {
  slot *slots;
  uint32_t mask, count;
} table;

struct vl__store {
  chunk *head;
  size_t next_cap;
  table strings, specs;
  uint32_t *users;
  size_t users_cap;
  vl__hash_key key;
};

vl__store *vl__store_new(void) {
  vl__store *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  s->next_cap = CHUNK_MIN;
  vl__hash_key_new(&s->key);
  return s;
}

void vl__store_free(vl__store *s) {
  if (s == NULL) return;
  for (chunk *c = s->head, *next; c != NULL; c = next) {
    next = c->next;
    free(c);
  }
  free(s->strings.slots);
  free(s->specs.slots);
  free(s->users);
  free(s);
}

static chunk *chunk_new(size_t cap) {
  if (cap > SIZE_MAX - sizeof(chunk)) return NULL;
  chunk *c = malloc(sizeof(chunk) + cap);
  if (c != NULL) {
    c->cap = cap;
    c->used = 0;
  }
  return c;
}

void *vl__store_alloc(vl__store *s, size_t n) {
  if (n > SIZE_MAX - ALIGN) return NULL;
  n = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
  chunk *h = s->head;
  if (h != NULL && h->cap - h->used >= n) {
    void *p = (char *)h->data + h->used;
    h->used += n;
    return p;
  }
  if (n > s->next_cap / 4 && h != NULL) { /* its own chunk, behind the current one */
    chunk *c = chunk_new(n);
    if (c == NULL) return NULL;
    c->used = n;
    c->next = h->next;
    h->next = c;
    return c->data;
  }
  chunk *c = chunk_new(n > s->next_cap ? n : s->next_cap);
  if (c == NULL) return NULL;
  if (s->next_cap < CHUNK_MAX) s->next_cap *= 2;
  c->next = h;
  s->head = c;
  c->used = n;
  return c->data;
}

void *vl__store_calloc(vl__store *s, size_t count, size_t size) {
  if (size != 0 && count > SIZE_MAX / size) return NULL;
  void *p = vl__store_alloc(s, count * size);
  if (p != NULL) memset(p, 0, count * size);
  return p;
}

const char *vl__store_str(vl__store *s, const char *p, size_t n) {
  char *d = n < SIZE_MAX ? vl__store_alloc(s, n + 1) : NULL;
  if (d == NULL) return NULL;
  memcpy(d, p, n);
  d[n] = '\0';
  return d;
}

uint64_t vl__store_hash(const vl__store *s, const void *p, size_t n) {
  return vl__hash(&s->key, p, n);
}

/* Keeps t at most half full; false when out of memory. */
static bool table_grow(table *t) {
  if (t->slots != NULL && (uint64_t)(t->count + 1) * 2 <= (uint64_t)t->mask + 1) return true;
  uint32_t old_cap = t->slots != NULL ? t->mask + 1 : 0, cap = old_cap ? old_cap * 2 : 64;
  if (cap == 0) return false;
  slot *slots = calloc(cap, sizeof *slots);
  if (slots == NULL) return false;
  for (uint32_t k = 0; k < old_cap; k++) {
    if (t->slots[k].p == NULL) continue;
    uint32_t i = t->slots[k].hash & (cap - 1);
    while (slots[i].p != NULL) i = (i + 1) & (cap - 1);
    slots[i] = t->slots[k];
  }
  free(t->slots);
  t->slots = slots;
  t->mask = cap - 1;
  return true;
}

const char *vl__store_intern(vl__store *s, const char *p, size_t n) {
  table *t = &s->strings;
  if (n > UINT32_MAX || !table_grow(t)) return NULL;
  uint32_t h = (uint32_t)vl__store_hash(s, p, n), i = h & t->mask;
  for (; t->slots[i].p != NULL; i = (i + 1) & t->mask) {
    const slot *e = &t->slots[i];
    if (e->hash == h && e->len == n && memcmp(e->p, p, n) == 0) return e->p;
  }
  const char *d = vl__store_str(s, p, n);
  if (d == NULL) return NULL;
  t->slots[i] = (slot){d, h, (uint32_t)n};
  t->count++;
  return d;
}

/* The hash of the fields vl_spec_equal compares, laid end to end. */
static uint32_t spec_hash(const vl__store *s, const vl_spec *v) {
  unsigned char b[3 + VL_MAX_RANK * (sizeof v->shape[0] + 1)];
  size_t n = 0, shape = (size_t)v->rank * sizeof v->shape[0];
  b[n++] = (unsigned char)v->dtype;
  b[n++] = v->rank;
  b[n++] = v->dynamic;
  memcpy(b + n, v->shape, shape);
  n += shape;
  memcpy(b + n, v->dim_order, v->rank);
  return (uint32_t)vl__store_hash(s, b, n + v->rank);
}

const vl_spec *vl__store_spec(vl__store *s, const vl_spec *spec) {
  table *t = &s->specs;
  uint8_t rank = spec->rank < VL_MAX_RANK ? spec->rank : VL_MAX_RANK;
  vl_spec key = {.dtype = spec->dtype, .rank = rank, .dynamic = spec->dynamic};
  memcpy(key.shape, spec->shape, rank * sizeof key.shape[0]);
  memcpy(key.dim_order, spec->dim_order, rank);
  if (!table_grow(t)) return NULL;
  uint32_t h = spec_hash(s, &key), i = h & t->mask;
  for (; t->slots[i].p != NULL; i = (i + 1) & t->mask) {
    if (t->slots[i].hash == h && vl_spec_equal(t->slots[i].p, &key)) return t->slots[i].p;
  }
  vl_spec *d = vl__store_alloc(s, sizeof *d);
  if (d == NULL) return NULL;
  *d = key;
  t->slots[i] = (slot){d, h, 0};
  t->count++;
  return d;
}

uint32_t *vl__store_users(vl__store *s, size_t n) {
  if (n <= s->users_cap && s->users != NULL) return s->users;
  if (n > SIZE_MAX / sizeof(uint32_t)) return NULL;
  uint32_t *u = malloc((n ? n : 1) * sizeof *u);
  if (u == NULL) return NULL;
  free(s->users);
  s->users = u;
  s->users_cap = n;
  return u;
}
