/* shares.h - what each user holds (--max-connections-per-uid, --max-queued-per-uid): a small
 * table of the users with a connection or a request, kept on the event loop thread. */
#ifndef VIEWLOWERD_SHARES_H
#define VIEWLOWERD_SHARES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct vld_uid_use {
  uid_t uid;
  uint32_t conns;  /* open, admitted connections */
  uint32_t queued; /* requests queued or running on the workers */
  uint64_t mem_ticket; /* the last place in the memory queue given to this user (server.c) */
} vld_uid_use;

typedef struct vld_shares {
  vld_uid_use *uids; /* unordered; entries holding nothing are dropped */
  size_t n, cap;
} vld_shares;

/* The use of uid, made (zeroed) when absent; NULL on out-of-memory. Pointers stay valid until
 * the next vld_shares_find or vld_shares_forget. */
vld_uid_use *vld_shares_find(vld_shares *s, uid_t uid);
/* Drops u when it holds nothing any more. */
void vld_shares_forget(vld_shares *s, vld_uid_use *u);
/* The use of uid if present (never made). */
const vld_uid_use *vld_shares_peek(const vld_shares *s, uid_t uid);
void vld_shares_free(vld_shares *s);

#endif
