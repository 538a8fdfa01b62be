/* topo_int.h — what topo.c (from hwloc) and topo_json.c (the summary)
 * share.
 */
#ifndef HERD_TOPO_INT_H
#define HERD_TOPO_INT_H

#include <stddef.h>

#include "herd/topo.h"

/* Copies src into a fixed field of size bytes; -1 when it does not fit. */
int topo_copy_name(char *dst, size_t size, const char *src);
/* Sorts the arrays of t into the orders topo.h documents. */
void topo_sort(struct topo *t);

#endif
