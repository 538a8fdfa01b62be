/* bind_int.h — what bind.c (the plan) and bind_platform.c (the platform
 * file) share: a parsed platform file, and the limits of both.
 */
#ifndef HERD_BIND_INT_H
#define HERD_BIND_INT_H

#include <hwloc.h>

#include "herd/bind.h"
#include "herd/topo.h"

/* Device names and list entries quoted in errors are cut to this many
 * bytes so that a message always fits struct herd_err. */
#define QUOTE_MAX 64

/* NIC ports accepted in a platform file or a bind.nic list. */
#define PORT_MAX 255

struct platform_gpu {
	char bus_id[TOPO_BUSID_MAX];
	char nic[TOPO_NAME_MAX];    /* "" when not given */
	int port;		    /* 0 when not given */
	char netdev[TOPO_NAME_MAX]; /* "" when not given */
	hwloc_bitmap_t cpus;	    /* NULL when not given */
};

struct bind_platform {
	char *name;
	struct platform_gpu *gpus;
	size_t n_gpus;
};

#endif
