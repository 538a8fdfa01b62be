/* preauth.h — who may hold a connection that has not proven the job
 * secret yet (the slurm transport's listener).
 *
 * The listener's address is on srun's command line, which every local
 * user can read, so anyone can open connections to it.  herd never stops
 * accepting because of them (a paused accept leaves herd's own agents in
 * the kernel's backlog behind the strangers); instead it bounds how many
 * unauthenticated connections it holds and, when a new one would pass a
 * bound, drops an old one:
 *
 *   - per source address: at most per_source pending at once; a new
 *     connection from a source at its bound replaces that source's
 *     oldest pending one;
 *   - in all: at most max pending; a new connection past it replaces the
 *     oldest pending connection of the source holding the most.
 *
 * Dropping the oldest, not refusing the newest, is the point: herd sends
 * its challenge the moment it accepts, and an agent answers within one
 * round trip, so the oldest pending connection is the one least likely
 * to be an agent.  (sshd's MaxStartups refuses the newest instead, which
 * lets 100 idle connections lock logins out for LoginGraceTime.)
 *
 * The pool is pure bookkeeping: it holds an opaque owner pointer per
 * connection and never touches fds or clocks (times are passed in).
 * Entries are kept in arrival order.
 */
#ifndef HERD_PREAUTH_H
#define HERD_PREAUTH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* A source address: IPv4 is kept as IPv4-mapped IPv6, so one host has
 * one key whichever family it connects over. */
struct preauth_src {
	unsigned char addr[16];
};

struct preauth;

/* A pool for at most max pending connections, per_source of them from
 * one address (1 <= per_source <= max).  Returns NULL when out of memory
 * or when the bounds make no sense. */
struct preauth *preauth_new(size_t max, size_t per_source);
void preauth_free(struct preauth *p);

/* The key of a peer address (AF_INET or AF_INET6; anything else is all
 * zeroes, one shared source). */
void preauth_src_of(struct preauth_src *src, const struct sockaddr *sa);

/* The owner of the pending connection that must be dropped before one
 * from src can be added, or NULL when there is room.  The caller closes
 * it and calls preauth_del(), then asks again. */
void *preauth_victim(struct preauth *p, const struct preauth_src *src);

/* Adds a pending connection (owner non-NULL, not yet in the pool)
 * accepted at now_ms.  Returns 0, or -1 when a bound is reached
 * (preauth_victim() was not honoured). */
int preauth_add(struct preauth *p, const struct preauth_src *src, void *owner,
		int64_t now_ms);

/* Removes owner (proven, failed or dropped); no-op when absent. */
void preauth_del(struct preauth *p, void *owner);

/* The oldest pending connection's owner and its accept time, or NULL
 * when none is pending. */
void *preauth_oldest(const struct preauth *p, int64_t *since_ms);

/* Pending connections in all, and from src. */
size_t preauth_count(const struct preauth *p);
size_t preauth_count_src(const struct preauth *p,
			 const struct preauth_src *src);

#endif
