/* plan.h — the binding plan of a job's ranks (plan.c), shared by
 * cmd/plan.c (plans from a topology file) and the controller (plans from
 * the topologies agents report). */
#ifndef HERD_LAUNCHER_PLAN_H
#define HERD_LAUNCHER_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "herd/bind.h"
#include "herd/err.h"

struct topo;

/* One node's plan; borrowed pointers. */
struct node_plan {
	const char *host;
	struct bind_rank *ranks;
	int n_ranks;
};

/* Places one node's ranks on topology t: slots of them (0: one per GPU,
 * else 1: bind_default_slots), each with its GPU, nearest NIC and cores.
 * On success *ranks (caller frees with bind_ranks_release() and free())
 * holds *n_ranks entries and 0 is returned; else -1 with err. */
int plan_ranks(const struct topo *t, int slots, const struct bind_opts *opts,
	       struct bind_rank **ranks, int *n_ranks, struct herd_err *err);

/* Prints the plan as the table or, with json, as an array of objects
 * {rank, node, host, local_rank, gpu, gpu_bus_id, nic, netdev, cpus}.
 * Returns 0, or -1 when stdout cannot be written. */
int plan_print(const struct node_plan *np, size_t n_nodes, bool json);

#endif
