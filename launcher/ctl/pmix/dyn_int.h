/* ctl/pmix/dyn_int.h — the state of PMIx_Spawn and PMIx_Connect shared by
 * ctl/pmix/spawn.c and ctl/pmix/connect.c.  Only those two include it.
 * Everything here is per attempt: ctl_spawn_clear() drops it.
 */
#ifndef HERD_LAUNCHER_CTL_PMIX_DYN_INT_H
#define HERD_LAUNCHER_CTL_PMIX_DYN_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "launcher/ctl/ctl_int.h"

/* PMIx status values (the standard's numbers) herd answers with. */
#define ST_ERROR		(-1)
#define ST_TIMEOUT		(-24)
#define ST_BAD_PARAM		(-27)
#define ST_OUT_OF_RESOURCE	(-29)
#define ST_NOT_FOUND		(-46)
#define ST_JOB_FAILED_TO_LAUNCH (-181)

struct dyn_spawn {
	int id;
	int asker; /* node index */
	int seq;
	int size;
	int first_slot;
	bool *want, *got; /* [node index] */
	int n_want, n_got;
	bool answered;
	char error[256];
	int64_t t0_ms, due_ms;
	long timer;
};

struct dyn_connect {
	char *key;    /* op and the sorted process list */
	bool *want;   /* [node index] */
	int *seq;     /* [node index]: its CONNECT's, 0: not yet */
	char **parts; /* [node index]: a fence's contribution */
	size_t *part_len;
	int n_want, n_got;
	int64_t due_ms;
	long timer;
};

struct ctl_dyn {
	struct dyn_spawn *spawns;
	int n_spawns;
	int n_procs;   /* spawned and alive in this attempt */
	int n_total;   /* spawned in this attempt, in all */
	int *per_node; /* spawned and alive per node index */
	struct dyn_connect *conns;
	int n_conns;
};

/* Node n is a member that is up: it may host spawned processes and take
 * part in a connect. */
bool dyn_node_in(const struct node *n);
/* The attempt's spawn and connect state, made on first use; NULL when
 * out of memory. */
struct ctl_dyn *dyn_of(struct ctl *c);
/* Spawn id of this attempt, or NULL. */
struct dyn_spawn *dyn_spawn_by_id(struct ctl *c, int id);
/* Drops connect k (its timer, its contributions). */
void dyn_connect_free(struct ctl *c, int k);

#endif
