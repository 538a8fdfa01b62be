/* hostlist.h — Slurm hostlist expressions: expand and compress.
 *
 * Syntax as Slurm's: "node[001-128]", "n[1-3,7,10-12]", several bracket
 * groups "rack[1-2]-gpu[01-04]" (expanded as Slurm does: with two groups
 * the leftmost is outermost; with more, the last group is innermost and
 * the others run right to left), comma-separated expressions, duplicates
 * kept in order.
 * Expansion and compression are libslurm's (what `scontrol show
 * hostnames` and `scontrol show hostlist` print; tests/integration compares
 * both on a corpus), after a strict syntax check that names the column of
 * a mistake.
 *
 * A hostlist owns copies of all its host names.
 */
#ifndef HERD_HOSTLIST_H
#define HERD_HOSTLIST_H

#include <stddef.h>

#include "herd/err.h"

/* Expansion stops with an error beyond this many hosts: a typo such as
 * "n[1-1000][1-1000][1-1000]" must not exhaust memory.  The largest
 * clusters have tens of thousands of nodes.  (One range holds at most
 * 65536 hosts, as in Slurm.) */
#ifndef HOSTLIST_MAX
#define HOSTLIST_MAX 1000000 /* fuzz builds set less: see the Makefile */
#endif

struct hostlist;

/* Returns an empty list, or NULL when out of memory. */
struct hostlist *hostlist_new(void);

/* Frees hl and its names; NULL is fine. */
void hostlist_free(struct hostlist *hl);

/* Expands expr and appends its hosts.  On error returns -1, fills err with
 * what was expected (column of the problem counted from 1), and leaves hl
 * as it was. */
int hostlist_push(struct hostlist *hl, const char *expr, struct herd_err *err);

/* Appends one host name as it is (no expansion).  Returns 0 or -1. */
int hostlist_push_host(struct hostlist *hl, const char *host,
		       struct herd_err *err);

/* Number of hosts, and the i-th host (i < count; owned by hl). */
size_t hostlist_count(const struct hostlist *hl);
const char *hostlist_nth(const struct hostlist *hl, size_t i);

/* The compressed expression, as `scontrol show hostlist` prints it.
 * Returns a malloc'd string the caller frees, or NULL when out of memory.
 * An empty list gives "". */
char *hostlist_compress(const struct hostlist *hl);

/* Convenience: a new list holding expr's expansion, or NULL with err. */
struct hostlist *hostlist_expand(const char *expr, struct herd_err *err);

#endif
