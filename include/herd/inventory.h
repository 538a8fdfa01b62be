/* inventory.h — the answer of an HTTP node inventory (nodes.inventory)
 * as an ordered host list.
 *
 * The answer is JSON: an array, or an object whose "nodes" (else "hosts")
 * member is an array.  Each entry is either
 *   - a string, the host name, or
 *   - an object with the host name in "name" (else "hostname", else
 *     "host") and, optionally, "slots": an integer from 1 to
 *     HOSTFILE_SLOTS_MAX.  Other members are for the filter.
 * Hosts keep the inventory's order.
 *
 * A filter is "key=value[,key=value...]".  An object entry is kept when
 * every pair matches: its member key (a dotted key walks into nested
 * objects: "labels.rack=r1") is a string equal to value, a number, true,
 * false or null whose JSON text is value, or an array holding such a
 * value.  A string entry has no members: with a filter it is dropped.
 * Blanks around keys and values are ignored.
 */
#ifndef HERD_INVENTORY_H
#define HERD_INVENTORY_H

#include <stddef.h>

#include "herd/err.h"
#include "herd/hostfile.h"

/* More filter pairs than this is an error (a typo, not a query). */
#define INVENTORY_FILTER_MAX 32

/* Checks a filter's syntax.  Returns 0, or -1 with err saying what was
 * expected. */
int inventory_filter_check(const char *filter, struct herd_err *err);

/* Parses an inventory's answer (len bytes, not NUL-terminated) and keeps
 * the entries filter (NULL or "" for none) matches.  what names the
 * inventory in messages.  Returns the hosts (at least one), or NULL with
 * err filled. */
struct hostfile *inventory_parse(const char *body, size_t len,
				 const char *filter, const char *what,
				 struct herd_err *err);

#endif
