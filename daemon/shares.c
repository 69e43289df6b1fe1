/* shares.c - the per-user table: a linear array (users with something open are few; a lookup
 * costs far less than the request it guards). */
#include "shares.h"

#include <stdlib.h>

vld_uid_use *vld_shares_find(vld_shares *s, uid_t uid) {
  for (size_t i = 0; i < s->n; i++) {
    if (s->uids[i].uid == uid) {
      return &s->uids[i];
    }
  }
  if (s->n == s->cap) {
    size_t cap = s->cap > 0 ? s->cap * 2 : 16;
    vld_uid_use *p = realloc(s->uids, cap * sizeof *p);
    if (p == NULL) {
      return NULL;
    }
    s->uids = p;
    s->cap = cap;
  }
  vld_uid_use *u = &s->uids[s->n++];
  *u = (vld_uid_use){.uid = uid};
  return u;
}

void vld_shares_forget(vld_shares *s, vld_uid_use *u) {
  if (u->conns == 0 && u->queued == 0 && u->unsent == 0) {
    *u = s->uids[--s->n]; /* the last entry takes its place */
  }
}

const vld_uid_use *vld_shares_peek(const vld_shares *s, uid_t uid) {
  for (size_t i = 0; i < s->n; i++) {
    if (s->uids[i].uid == uid) {
      return &s->uids[i];
    }
  }
  return NULL;
}

bool vld_shares_add_unsent(vld_shares *s, uid_t uid, uint64_t from, uint64_t to) {
  vld_uid_use *u = vld_shares_find(s, uid);
  if (u == NULL) {
    return false;
  }
  bool was_over = u->unsent >= s->unsent_share;
  u->unsent = u->unsent - from + to; /* from is part of it: told before */
  bool over = u->unsent >= s->unsent_share;
  if (over != was_over) {
    atomic_fetch_add_explicit(&s->n_over, over ? 1u : (uint32_t)-1, memory_order_relaxed);
  }
  vld_shares_forget(s, u);
  return true;
}

bool vld_shares_over_memory(const vld_shares *s, uid_t uid) {
  const vld_uid_use *u = s->n > 1 ? vld_shares_peek(s, uid) : NULL;
  return u != NULL && u->unsent >= s->unsent_share;
}

bool vld_shares_any_over(const vld_shares *s) {
  return atomic_load_explicit(&s->n_over, memory_order_relaxed) > 0;
}

uint64_t vld_shares_unsent(const vld_shares *s) {
  uint64_t sum = 0;
  for (size_t i = 0; i < s->n; i++) {
    sum += s->uids[i].unsent;
  }
  return sum;
}

void vld_shares_free(vld_shares *s) {
  free(s->uids);
  s->uids = NULL;
  s->n = s->cap = 0;
}
