/* plan.h — printing a binding plan (herd plan), shared by cmd_plan.c
 * (plans from a topology file) and the controller (plans from the
 * topologies agents report). */
#ifndef HERD_LAUNCHER_PLAN_H
#define HERD_LAUNCHER_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "herd/bind.h"

/* One node's plan; borrowed pointers. */
struct node_plan {
	const char *host;
	struct bind_rank *ranks;
	int n_ranks;
};

/* Prints the plan as the table or, with json, as an array of objects
 * {rank, node, host, local_rank, gpu, gpu_bus_id, nic, netdev, cpus}.
 * Returns 0, or -1 when stdout cannot be written. */
int plan_print(const struct node_plan *np, size_t n_nodes, bool json);

#endif
