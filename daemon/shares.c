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
  if (u->conns == 0 && u->queued == 0) {
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

void vld_shares_free(vld_shares *s) {
  free(s->uids);
  s->uids = NULL;
  s->n = s->cap = 0;
}
