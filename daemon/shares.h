/* shares.h - what each user holds (--max-connections-per-uid, --max-queued-per-uid,
 * --max-memory-per-uid): a small table of the users with a connection, a request or an unread
 * response, shared by the event loops under the server's lock. */
#ifndef VIEWLOWERD_SHARES_H
#define VIEWLOWERD_SHARES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct vld_uid_use {
  uid_t uid;
  uint32_t conns;  /* open, admitted connections */
  uint32_t queued; /* requests queued or running on the workers */
  uint64_t unsent; /* memory of its responses not yet written to its peers (conn.c's steps) */
  uint64_t mem_ticket; /* the last place in the memory queue given to this user (server.c) */
} vld_uid_use;

typedef struct vld_shares {
  vld_uid_use *uids; /* unordered; entries holding nothing are dropped */
  size_t n, cap;
  uint64_t unsent_share;   /* --max-memory-per-uid, resolved against the budget (server.c) */
  _Atomic uint32_t n_over; /* users whose unsent is at unsent_share or more; read unlocked */
} vld_shares;

/* The use of uid, made (zeroed) when absent; NULL on out-of-memory. Pointers stay valid until
 * the next vld_shares_find or vld_shares_forget. */
vld_uid_use *vld_shares_find(vld_shares *s, uid_t uid);
/* Drops u when it holds nothing any more. */
void vld_shares_forget(vld_shares *s, vld_uid_use *u);
/* The use of uid if present (never made). */
const vld_uid_use *vld_shares_peek(const vld_shares *s, uid_t uid);
/* The unsent responses of one of uid's connections went from bytes to bytes (as last told);
 * false on out-of-memory (nothing counted: tell it again). */
bool vld_shares_add_unsent(vld_shares *s, uid_t uid, uint64_t from, uint64_t to);
/* The one rule of the memory share: while another user is connected or has work, a user whose
 * unsent responses hold unsent_share bytes or more is over its share (its connections with
 * unread responses are not read, its work not yet started is refused). Alone, a user may hold
 * the whole budget. */
bool vld_shares_over_memory(const vld_shares *s, uid_t uid);
/* Is any user at its memory share? Without the lock: false means no one is over. */
bool vld_shares_any_over(const vld_shares *s);
/* The unsent bytes of every user. */
uint64_t vld_shares_unsent(const vld_shares *s);
void vld_shares_free(vld_shares *s);

#endif
