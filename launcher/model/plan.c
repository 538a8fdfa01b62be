/* plan.c — the binding plan of a job's ranks, in one place: `herd plan
 * --topology` (every node from one hwloc XML) and the controller (each
 * node from the topology its agent reported) both place a node's ranks
 * with plan_ranks() and print with plan_print().  Pure: nothing here
 * contacts a node or reads the spec.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "herd/topo.h"
#include "launcher/model/plan.h"

int plan_ranks(const struct topo *t, int slots, const struct bind_opts *opts,
	       struct bind_rank **ranks, int *n_ranks, struct herd_err *err)
{
	struct bind_rank *r;
	int n = slots > 0 ? slots : bind_default_slots(t);

	*ranks = NULL;
	*n_ranks = 0;
	r = calloc((size_t)n, sizeof(*r));
	if (!r)
		return herd_errprintf(err, "out of memory");
	if (bind_plan(t, n, opts, r, err) < 0) {
		free(r);
		return -1;
	}
	*ranks = r;
	*n_ranks = n;
	return 0;
}

/* "mlx5_1:1" into buf, or "" without a NIC. */
static void nic_text(const struct bind_rank *r, char *buf, size_t size)
{
	if (r->nic[0])
		snprintf(buf, size, "%s:%d", r->nic, r->nic_port);
	else
		buf[0] = '\0';
}

static json_t *str_or_null(const char *s)
{
	return s && s[0] ? json_string(s) : json_null();
}

static int print_json(const struct node_plan *np, size_t n_nodes)
{
	int rank = 0;

	if (fputs("[", stdout) < 0)
		return -1;
	for (size_t i = 0; i < n_nodes; i++) {
		for (int l = 0; l < np[i].n_ranks; l++, rank++) {
			const struct bind_rank *r = &np[i].ranks[l];
			char nic[TOPO_NAME_MAX + 16];
			json_t *o;
			char *s;

			nic_text(r, nic, sizeof(nic));
			o = json_pack(
			    "{s:i, s:i, s:s, s:i, s:o, s:o, s:o, s:o, "
			    "s:o}",
			    "rank", rank, "node", (int)i, "host", np[i].host,
			    "local_rank", l, "gpu",
			    r->gpu >= 0 ? json_integer(r->gpu) : json_null(),
			    "gpu_bus_id", str_or_null(r->gpu_bus_id), "nic",
			    str_or_null(nic), "netdev", str_or_null(r->netdev),
			    "cpus", str_or_null(r->cpus));
			if (!o)
				return -1;
			s = json_dumps(o,
				       JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
			json_decref(o);
			if (!s)
				return -1;
			printf("%s\n%s", rank ? "," : "", s);
			free(s);
		}
	}
	if (fputs("\n]\n", stdout) < 0)
		return -1;
	return 0;
}

/* The columns of the table, in order. */
enum {
	C_RANK,
	C_NODE,
	C_HOST,
	C_LOCAL,
	C_GPU,
	C_BUS,
	C_NIC,
	C_NETDEV,
	C_CPUS,
	N_COLS
};

static const char *const col_names[N_COLS] = {
    "RANK", "NODE", "HOST", "LOCAL", "GPU", "BUS_ID", "NIC", "NETDEV", "CPUS",
};

/* The cells of one row; numbers are written into own. */
static void row_cells(const struct node_plan *np, size_t node, int l, int rank,
		      char own[5][TOPO_NAME_MAX + 16], const char *cell[N_COLS])
{
	const struct bind_rank *r = &np[node].ranks[l];

	snprintf(own[0], sizeof(own[0]), "%d", rank);
	snprintf(own[1], sizeof(own[1]), "%zu", node);
	snprintf(own[2], sizeof(own[2]), "%d", l);
	snprintf(own[3], sizeof(own[3]), "%d", r->gpu);
	nic_text(r, own[4], sizeof(own[4]));
	cell[C_RANK] = own[0];
	cell[C_NODE] = own[1];
	cell[C_HOST] = np[node].host;
	cell[C_LOCAL] = own[2];
	cell[C_GPU] = r->gpu >= 0 ? own[3] : "-";
	cell[C_BUS] = r->gpu_bus_id[0] ? r->gpu_bus_id : "-";
	cell[C_NIC] = own[4][0] ? own[4] : "-";
	cell[C_NETDEV] = r->netdev[0] ? r->netdev : "-";
	cell[C_CPUS] = r->cpus && r->cpus[0] ? r->cpus : "-";
}

static int print_table(const struct node_plan *np, size_t n_nodes)
{
	size_t width[N_COLS];
	char own[5][TOPO_NAME_MAX + 16];
	const char *cell[N_COLS];
	int rank = 0;

	for (int c = 0; c < N_COLS; c++)
		width[c] = strlen(col_names[c]);
	for (size_t i = 0; i < n_nodes; i++)
		for (int l = 0; l < np[i].n_ranks; l++, rank++) {
			row_cells(np, i, l, rank, own, cell);
			for (int c = 0; c < N_COLS; c++)
				if (strlen(cell[c]) > width[c])
					width[c] = strlen(cell[c]);
		}
	for (int c = 0; c < N_COLS; c++)
		printf("%-*s%s", c < N_COLS - 1 ? (int)width[c] : 0,
		       col_names[c], c < N_COLS - 1 ? "  " : "\n");
	rank = 0;
	for (size_t i = 0; i < n_nodes; i++)
		for (int l = 0; l < np[i].n_ranks; l++, rank++) {
			row_cells(np, i, l, rank, own, cell);
			for (int c = 0; c < N_COLS; c++)
				printf("%-*s%s",
				       c < N_COLS - 1 ? (int)width[c] : 0,
				       cell[c], c < N_COLS - 1 ? "  " : "\n");
		}
	return ferror(stdout) ? -1 : 0;
}

int plan_print(const struct node_plan *np, size_t n_nodes, bool json)
{
	if ((json ? print_json(np, n_nodes) : print_table(np, n_nodes)) < 0 ||
	    fflush(stdout) != 0)
		return -1;
	return 0;
}
